# frozen_string_literal: true

require "test_helper"
require "support/rack_server"

# Fathom::Railtie in a real (minimal) Rails app, Debian's ruby-railties,
# run outside Bundler as a subprocess on Debian's Ruby (RackServer::SYSTEM_RUBY),
# for which railties is packaged.
class RailtieTest < Minitest::Test
  FIXTURE = File.join(TestHelper::ROOT, "test/fixtures/rails_app.rb")

  def setup
    require_native!
    (why = RackServer.elsewhere) && skip(why)
    _, status = Open3.capture2e(TestHelper::PLAIN_ENV, RackServer::SYSTEM_RUBY, "-e", 'require "rails"; require "action_controller/railtie"')
    return if status.success?

    flunk("railties not installed (apt-get install ruby-railties)") if TestHelper.ci?
    skip("railties not installed (apt-get install ruby-railties)")
  end

  def run_app(env)
    out, err, status = Open3.capture3(TestHelper::PLAIN_ENV.merge(env), RackServer::SYSTEM_RUBY, "-I#{TestHelper::LIB}", FIXTURE)
    assert status.success?, err
    [out, err]
  end

  def test_from_fathom_variables_always_on_and_endpoints
    Dir.mktmpdir do |dir|
      out, err = run_app("FATHOM_DIR" => dir, "FATHOM_MODE" => "heap,gc", "FATHOM_EVERY" => "3600s", "FATHOM_RACK" => "1",
                         "FATHOM_TEST_OUT" => File.join(dir, "fetched.bin"))
      assert_includes out, "profilers=heap,gc"
      assert_includes out, "middleware=true"
      assert_match(%r{heap=200 application/octet-stream}, out)
      assert_equal "inuse_space", Fathom::Pprof.read(File.binread(File.join(dir, "fetched.bin"))).default_sample_type
      # At exit each mode wrote its last file.
      assert_equal %w[gc heap], Dir.children(dir).grep(/pb\.gz\z/).map { |f| f[/\A[a-z]+/] }.sort, err
    end
  end

  def test_without_fathom_variables_it_adds_nothing
    out, = run_app("FATHOM_DIR" => nil, "FATHOM_RACK" => nil)
    refute_includes out, "profilers="
    assert_includes out, "middleware=false"
    assert_match(/heap=404/, out)
  end
end
