# frozen_string_literal: true

require "test_helper"
require "fathom/rack"
require "fathom/always_on/always_on"
require "tmpdir"

# The reproductions of "Safe to switch on in production": requests that are
# not Fathom's pass through the middleware untouched, big values are capped,
# the messages name the real reason, and durations take minutes and hours.
class RackProductionTest < Minitest::Test
  PAGE = [200, { "content-type" => "text/html" }, ["the app's page"]].freeze

  def env(query, path: "/")
    { "REQUEST_METHOD" => "GET", "SCRIPT_NAME" => "", "PATH_INFO" => path, "QUERY_STRING" => query,
      "REMOTE_ADDR" => "127.0.0.1", "SERVER_PROTOCOL" => "HTTP/1.1", "HTTP_HOST" => "localhost" }
  end

  def middleware
    seen = []
    mw = Fathom::Rack::Middleware.new(->(e) { seen << e["QUERY_STRING"]; PAGE }, enabled: true, token: nil)
    [mw, seen]
  end

  def test_requests_that_are_not_fathoms_pass_through_untouched
    mw, seen = middleware
    queries = ["q=#{"x" * 3000}", "q=#{"x" * 3000}&fathom=", "fathom=", "fathom=&q=1", "a=1&fathom=", "notfathom=heap",
               "xfathom=heap", "q=%zz&fathom=", "q=fathom=", "a=1;fathom=heap", "%66athom=heap", "q=\xff".b]
    queries.each do |query|
      assert_same PAGE, mw.call(env(query)), query[0, 60]
    end
    assert_equal queries, seen
  end

  def test_a_fathom_request_with_a_bad_value_is_fathoms_and_says_what_is_allowed
    mw, seen = middleware
    status, _, body = mw.call(env("fathom=nope"))
    assert_equal 400, status
    assert_match(/fathom must be one of heap, gc, cpu/, body.join)
    status, _, body = mw.call(env("fathom=heap&q=#{"x" * 3000}"))
    assert_equal [400, "fathom: query string too long\n"], [status, body.join]
    assert_empty seen
  end

  def test_huge_seconds_are_capped_not_refused
    config = Fathom::Rack::Config.new(enabled: true, token: nil)
    ["99999999999999", "9" * 500, "0061", "61"].each do |text|
      params = Fathom::Rack::Params.new("seconds=#{text}", config)
      assert_equal 60, params.seconds, text[0, 20]
      assert params.capped
    end
    assert_equal 7, Fathom::Rack::Params.new("seconds=007", config).seconds
    %w[0 000 -1 1.5 1e3 abc].each do |text|
      error = assert_raises(Fathom::Rack::Refusal) { Fathom::Rack::Params.new("seconds=#{text}", config).seconds }
      assert_equal 400, error.status, text
    end
  end

  # cpu and wall run always-on now, one of them: the message says why not both.
  def test_cpu_and_wall_together_and_retention_are_refused_always_on_for_what_they_are
    Dir.mktmpdir do |dir|
      %w[cpu,wall heap,cpu,wall].each do |modes|
        error = assert_raises(ArgumentError) { Fathom::AlwaysOn.new(modes: modes, dir: dir) }
        assert_match(/cpu and wall cannot be profiled together \(one sampler per process\)/, error.message, modes)
      end
      error = assert_raises(ArgumentError) { Fathom::AlwaysOn.new(modes: "retention", dir: dir) }
      assert_match(/too heavy to repeat on a schedule\); modes: heap, gc, cpu, wall\z/, error.message)
    end
  end

  def test_durations_take_minutes_and_hours_within_each_range
    o = Fathom::Options
    assert_equal 300 * 10**9, o.duration_ns("FATHOM_EVERY", "5m")
    assert_equal 300 * 10**9, o.duration_ns("FATHOM_EVERY", "5min")
    assert_equal 3600 * 10**9, o.duration_ns("FATHOM_EVERY", "1h")
    assert_equal 90 * 10**9, o.duration_ns("x", "1.5m")
    assert_equal 5 * 10**6, o.duration_ns("x", "5ms") # not 5 minutes
    # Ranges still apply: the sampling interval stops at an hour.
    assert_equal 3600 * 10**9, o.duration_ns("interval", "1h", max_ns: o::SAMPLING_INTERVAL_NS.end)
    assert_raises(ArgumentError) { o.duration_ns("interval", "2h", max_ns: o::SAMPLING_INTERVAL_NS.end) }
    assert_raises(ArgumentError) { o.duration_ns("x", "1mh") }
    assert_raises(ArgumentError) { o.duration_ns("x", "1hour") }
  end

  def test_fathom_every_in_minutes_and_hours_through_setup
    require_native!
    script = <<~RUBY
      require "fathom/setup"
      s = Fathom::AlwaysOn::Setup.always_on
      puts s ? s.flushers.values.map { |f| f.instance_variable_get(:@interval_ns) }.inspect : "not started"
      Fathom::AlwaysOn::Setup.stop
    RUBY
    %w[5m 1h].each do |every|
      Dir.mktmpdir do |dir|
        out, err, status = Open3.capture3({ "FATHOM_DIR" => dir, "FATHOM_MODE" => "gc", "FATHOM_EVERY" => every },
                                          RbConfig.ruby, "-I#{File.expand_path("../../lib", __dir__)}", "-e", script)
        assert status.success?, err
        refute_match(/FATHOM_EVERY/, err)
        assert_equal "[#{every == "5m" ? 300 * 10**9 : 3600 * 10**9}]", out.strip, err
      end
    end
  end
end
