# frozen_string_literal: true

require "test_helper"
require "fathom/rack"
require "fathom/always_on/always_on"
require "fathom/pprof/reader"

# What a scraper (Grafana Alloy's pyroscope.scrape, a person's browser)
# meets: /profile while always-on CPU runs is a window of it, every
# response names the pid that answered, and the prefix is an index page.
class RackScrapeTest < Minitest::Test
  class Sink
    attr_reader :deliveries

    def initialize = @deliveries = []
    def deliver(profile, mode:, from_ns:, until_ns:) = @deliveries << [mode, profile, from_ns, until_ns]
    def stop(timeout:) = nil
    def after_fork_child = @deliveries = []
  end

  def setup
    require_native!
  end

  def teardown
    @always_on&.stop
  end

  def env(path, query = "", headers = {})
    { "REQUEST_METHOD" => "GET", "SCRIPT_NAME" => "", "PATH_INFO" => path, "QUERY_STRING" => query,
      "REMOTE_ADDR" => "127.0.0.1", "SERVER_PROTOCOL" => "HTTP/1.1", "HTTP_HOST" => "localhost" }.merge(headers)
  end

  def call(app, path, query = "", headers = {})
    status, h, body = app.call(env(path, query, headers))
    [status, h, body.each.to_a.join]
  end

  def burn(seconds)
    t = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    nil while Process.clock_gettime(Process::CLOCK_MONOTONIC) - t < seconds
  end

  # /profile while always-on cpu runs: 200 (not 409 "another CPU
  # profiler"), a window of it, stamped, handed to the sink as well;
  # ?mode=wall says which mode to ask for; ?fathom=cpu takes a window too.
  def test_profile_is_a_window_of_always_on_cpu
    sink = Sink.new
    @always_on = Fathom::AlwaysOn.new(modes: "cpu", sinks: [sink], every: "1h").start
    app = Fathom::Rack::App.new(enabled: true, always_on: @always_on)
    burner = Thread.new { burn(1.2) }
    status, headers, body = call(app, "/debug/fathom/profile", "seconds=1")
    burner.join
    assert_equal 200, status, body
    assert_equal "always-on", headers["x-fathom-source"]
    profile = Fathom::Pprof.read(body)
    assert_includes profile.comments, "pid=#{Process.pid}"
    # 1 s of a busy thread at 10 ms: ~100 samples; none would be a broken window.
    assert_operator profile.samples.size, :>, 0
    # The window's flush before and the window itself reached the sink.
    assert_equal [:cpu], sink.deliveries.map(&:first).uniq
    assert_equal body.b, sink.deliveries.last[1].bytes.b
    assert_operator sink.deliveries.last[3] - sink.deliveries.last[2], :>=, 1_000_000_000

    status, _, body = call(app, "/debug/fathom/profile", "seconds=1&mode=wall")
    assert_equal 409, status
    assert_match(/always-on cpu profiling holds the CPU sampler .*\?mode=cpu/, body)
    status, _, body = call(app, "/debug/fathom/profile", "seconds=1&format=firefox")
    assert_equal 409, status
    assert_match(/writes pprof: ask for \?format=pprof/, body)

    mw = Fathom::Rack::Middleware.new(->(_) { burn(0.05); [200, {}, ["page"]] }, enabled: true, always_on: @always_on)
    status, headers, = mw.call(env("/", "fathom=cpu"))
    assert_equal 200, status
    assert_equal "always-on", headers["x-fathom-source"]
  end

  # Every response of the endpoints and of ?fathom= says which process
  # answered, errors included; pprof bodies carry pid= too.
  def test_every_response_names_the_pid
    heap = Fathom::HeapProfiler.new.start
    app = Fathom::Rack::App.new(enabled: true, heap: heap)
    pid = Process.pid.to_s
    { ["/debug/fathom/", ""] => 200, ["/debug/fathom/heap", ""] => 200, ["/debug/fathom/allocs", "debug=1"] => 200,
      ["/debug/fathom/nope", ""] => 404, ["/debug/fathom/heap", "format=firefox"] => 400,
      ["/debug/fathom/gc", "seconds=x"] => 400 }.each do |(path, query), want|
      status, headers, body = call(app, path, query)
      assert_equal want, status, "#{path}?#{query}: #{body}"
      assert_equal pid, headers["x-fathom-pid"], "#{path}?#{query}"
    end
    status, headers, = call(app, "/debug/fathom/heap", "", "REQUEST_METHOD" => "POST")
    assert_equal [405, pid], [status, headers["x-fathom-pid"]]
    status, headers, = call(app, "/debug/fathom/heap", "", "REMOTE_ADDR" => "10.1.2.3")
    assert_equal [403, pid], [status, headers["x-fathom-pid"]]
    _, _, body = call(app, "/debug/fathom/heap")
    assert_includes Fathom::Pprof.read(body).comments, "pid=#{pid}"

    mw = Fathom::Rack::Middleware.new(->(_) { [200, {}, ["page"]] }, enabled: true)
    status, headers, = mw.call(env("/", "fathom=nope"))
    assert_equal [400, pid], [status, headers["x-fathom-pid"]]
    status, headers, = mw.call(env("/", "fathom=gc"))
    assert_equal [200, pid], [status, headers["x-fathom-pid"]]
    Dir.mktmpdir do |dir|
      writer = Fathom::Rack::Middleware.new(->(_) { [200, {}, ["page"]] }, enabled: true, dir: dir)
      status, headers, = writer.call(env("/", "fathom=gc"))
      assert_equal [200, pid], [status, headers["x-fathom-pid"]]
    end
  ensure
    heap&.stop
  end

  # The prefix is an index: HTML (links to each endpoint, absolute,
  # everything escaped) for a browser, text for curl and scrapers.
  def test_index_is_html_for_a_browser_and_text_otherwise
    app = Fathom::Rack::App.new(enabled: true, prefix: "/debug/<b>&\"x\"")
    browser = { "HTTP_ACCEPT" => "text/html,application/xhtml+xml,*/*;q=0.8" }
    status, headers, page = call(app, "/debug/<b>&\"x\"", "", browser)
    assert_equal 200, status
    assert_equal "text/html; charset=utf-8", headers["content-type"]
    assert_equal "default-src 'none'", headers["content-security-policy"]
    refute_includes page, "<b>", "the prefix is escaped"
    %w[heap allocs gc retention profile].each do |name|
      assert_includes page, %(href="/debug/&lt;b&gt;&amp;&quot;x&quot;/#{name}), name
    end
    assert_includes page, "pid #{Process.pid}"

    mounted = Fathom::Rack::App.new(enabled: true)
    _, _, page = call(mounted, "/", "", browser.merge("SCRIPT_NAME" => "/ops/fathom"))
    assert_includes page, %(href="/ops/fathom/heap?debug=1")

    status, headers, text = call(mounted, "/debug/fathom/", "", "HTTP_ACCEPT" => "*/*")
    assert_equal 200, status
    assert_equal "text/plain; charset=utf-8", headers["content-type"]
    assert_match(/\Aheap +live memory/, text.lines[2])
    assert_includes text, "pid #{Process.pid}"
  end
end
