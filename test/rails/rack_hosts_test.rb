# frozen_string_literal: true

require "test_helper"
require "support/rails_app"

# FATHOM_RACK=1 in the suite's Rails app (config.hosts: localhost,
# 127.0.0.1, www.example.com): the endpoints sit behind Rails' host
# authorization, and a bad FATHOM_RACK_* value boots the app without them.
class RackHostsTest < Minitest::Test
  def setup
    require_native!
    RailsApp.require!(self)
    @dir = Dir.mktmpdir("fathom-rails-hosts")
  end

  def teardown
    @server&.stop
    FileUtils.rm_rf(@dir)
  end

  def test_the_endpoints_run_after_host_authorization
    out, err, status = RailsApp.rails("middleware", env: { "FATHOM_RACK" => "1" })
    assert status.success?, err
    stack = out.lines.map { |l| l.split.last }
    i = stack.index("ActionDispatch::HostAuthorization")
    refute_nil i, out
    assert_equal %w[Fathom::Rack::App Fathom::Rack::Middleware], stack[i + 1, 2], out
  end

  def test_a_rebinding_host_is_refused_before_the_endpoints
    @server = RailsApp::Server.new({ "FATHOM_DIR" => @dir, "FATHOM_MODE" => "heap", "FATHOM_EVERY" => "3600s",
                                     "FATHOM_RACK" => "1" }, workers: 1)
    rebind = { "Host" => "rebind.attacker.example" }
    assert_equal "403", @server.get("/", rebind).code
    %w[/debug/fathom/heap /debug/fathom/retention /debug/fathom/ /products?fathom=cpu].each do |path|
      res = @server.get(path, rebind)
      assert_equal "403", res.code, path
      refute_match(/\Afathom:/, res.body.to_s, "Rails' HostAuthorization answered, not Fathom")
    end
    heap = @server.get("/debug/fathom/heap", { "Host" => "localhost" })
    assert_equal "200", heap.code, heap.body
    assert_equal "application/octet-stream", heap["content-type"]
    # A name Rails allows but that is not local: Fathom's own check (no token).
    res = @server.get("/debug/fathom/", { "Host" => "www.example.com" })
    assert_equal ["403", true], [res.code, res.body.include?("is not a local name")]
    assert_equal "200", @server.get("/products?fathom=", { "Host" => "localhost" }).code
  end

  def test_a_short_token_boots_the_app_without_the_endpoints
    @server = RailsApp::Server.new({ "FATHOM_RACK" => "1", "FATHOM_RACK_TOKEN" => "short" }, workers: 1)
    assert_equal "200", @server.get("/products").code
    res = @server.get("/debug/fathom/heap")
    assert_equal "404", res.code
    refute_match(/\Afathom:/, res.body.to_s, "Rails' 404, not Fathom's")
    lines = @server.log_text.lines.grep(/^fathom/)
    assert_equal 1, lines.size, @server.log_text
    assert_match(/FATHOM_RACK=1 ignored, token must be at least 16/, lines.first)
  end
end
