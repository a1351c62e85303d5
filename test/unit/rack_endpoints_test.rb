# frozen_string_literal: true

require "test_helper"
require "fathom/rack"
require "support/pprof_raw"
require "minitest/mock"

# What the endpoints and the per-request middleware serve, read back with
# Fathom's pprof reader and `go tool pprof`.
class RackEndpointsTest < Minitest::Test
  module Leaky
    KEEP = []
    def self.leak(n) = n.times { KEEP << ("x" * 200) }
  end

  def setup
    require_native!
    @dir = Dir.mktmpdir("fathom-rack")
  end

  def teardown
    @profiler&.stop
    @profiler = nil
    Leaky::KEEP.clear
    FileUtils.rm_rf(@dir)
    # Exact-mode collectors hold malloc'ed maps until collected; left to a
    # later test's GC they count as old malloc growth and turn that test's
    # GC.start into an "oldmalloc" major (gc_profile_test checks the reason).
    GC.start
  end

  def env(path, query = "")
    { "REQUEST_METHOD" => "GET", "SCRIPT_NAME" => "", "PATH_INFO" => path, "QUERY_STRING" => query,
      "REMOTE_ADDR" => "127.0.0.1", "SERVER_PROTOCOL" => "HTTP/1.1" }
  end

  def fetch(app, path, query = "")
    status, headers, body = app.call(env(path, query))
    assert_equal 200, status, body.join
    [headers, body.join]
  end

  def heap_app
    @profiler = Fathom::HeapProfiler.new(exact: true).start
    Leaky.leak(2000)
    Fathom::Rack::App.new(enabled: true, heap: @profiler)
  end

  def test_heap_and_allocs_default_sample_types_and_comments
    app = heap_app
    headers, body = fetch(app, "/debug/fathom/heap")
    assert_match(/filename="heap.pb.gz"/, headers["content-disposition"])
    heap = Fathom::Pprof.read(body)
    assert_equal "inuse_space", heap.default_sample_type
    assert_includes heap.comments, "pid=#{Process.pid}"
    assert heap.comments.any? { |c| c.start_with?("hostname=") }
    assert_includes heap.comments, "ruby=#{RUBY_VERSION} (#{RUBY_PLATFORM})"
    assert heap.comments.any? { |c| c.match?(/\Awindow=\d{4}-\d\d-\d\dT[\d:.]+Z\/\d{4}-/) }, heap.comments.inspect
    File.binwrite(path = File.join(@dir, "heap.pb.gz"), body)
    assert_operator PprofRaw.read(path).cum("inuse_space", /Leaky.leak/), :>=, 2000 * 200
    assert Fathom::Files::AtomicFile.written_by_fathom?(path), "still Fathom's gzip"

    Leaky.leak(500)
    _, body = fetch(app, "/debug/fathom/allocs")
    allocs = Fathom::Pprof.read(body)
    assert_equal "alloc_space", allocs.default_sample_type
    assert_equal heap.sample_type_names, allocs.sample_type_names
    File.binwrite(path, body)
    skip_unless_go!
    assert_match(/Type: alloc_space/, go_pprof("-top", "-symbolize=none", path))
  end

  # The snapshot and its reply are made on a thread of their own, so that
  # their native allocations land in one glibc arena rather than one per
  # server thread (docs/internals/serving.md, "Memory after serving"); the caller
  # still gets the profile, and an error raised there reaches it.
  def test_retention_snapshot_is_taken_on_a_thread_of_its_own
    app = Fathom::Rack::App.new(enabled: true, retention_max_objects: 1 << 30)
    taken_on = nil
    original = Fathom.method(:retention_snapshot)
    spy = lambda do |**opts|
      taken_on = Thread.current
      original.call(**opts)
    end
    headers, body = Fathom.stub(:retention_snapshot, spy) { fetch(app, "/debug/fathom/retention") }
    assert_equal "application/octet-stream", headers["content-type"]
    assert_operator body.bytesize, :>, 0
    refute_nil taken_on
    refute_same Thread.current, taken_on
    assert_equal "fathom-profile", taken_on.name

    failing = ->(**) { raise Fathom::Error, "walk failed at 0xdeadbeef" }
    status, _, error_body = nil
    capture_io { status, _, error_body = Fathom.stub(:retention_snapshot, failing) { app.call(env("/debug/fathom/retention")) } }
    assert_equal 500, status
    refute_match(/walk failed|0xdeadbeef/, error_body.join) # error bodies leak nothing
  end

  # /debug/fathom/leaks: 409 without FATHOM_LEAKS=1; the monitor's verdicts
  # as JSON; ?holders= checked before any snapshot, then a forked snapshot
  # of what holds a site's live sampled objects (Leaks::Holders).
  def test_leaks_endpoint_verdicts_and_holders
    require "fathom/leaks/monitor"
    app = heap_app
    status, = app.call(env("/debug/fathom/leaks"))
    assert_equal 409, status
    monitor = Fathom::Leaks::Monitor.new(heap_profiler: @profiler)
    Fathom::Leaks::Monitor.current = monitor
    monitor.process(@profiler.flush.bytes)
    _, body = fetch(app, "/debug/fathom/leaks")
    doc = JSON.parse(body)
    assert_equal false, doc["leak_found"]
    assert_equal 1, doc.dig("monitor", "windows_seen")
    assert_equal 1, doc["processes"].size

    [["holders=", 400], ["holders=nowhere", 400], ["holders=#{(1..21).map { |i| "a.rb:#{i}" }.join(",")}", 400]].each do |query, want|
      status, = app.call(env("/debug/fathom/leaks", query))
      assert_equal want, status, query
    end
    line = method(:heap_app).owner::Leaky.method(:leak).source_location
    _, body = fetch(app, "/debug/fathom/leaks", "holders=#{line[0]}:#{line[1]}")
    record = JSON.parse(body).fetch("holders").first
    # The record's shape only: after the flush above, this exact-mode
    # profiler's live_objects lists none of Leaky's strings (only what was
    # allocated since the flush), so the record follows no object here;
    # test/integration/leak_verdicts_test.rb checks holders end to end.
    assert_equal "#{line[0]}:#{line[1]}", record["site"]
    assert_kind_of Array, record["paths"]
  ensure
    Fathom::Leaks::Monitor.current = nil if defined?(Fathom::Leaks::Monitor)
  end

  def test_debug_1_is_the_text_report
    app = heap_app
    headers, body = fetch(app, "/debug/fathom/heap", "debug=1&gc=1")
    assert_match(%r{\Atext/plain}, headers["content-type"])
    assert_match(/flat%.*Leaky\.leak/m, body) # the site of its String#*
    _, body = fetch(app, "/debug/fathom/allocs", "debug=1")
    assert_match(/Type: alloc_space/, body)
  end

  # Behind a preforking server (puma workers) the text must say which
  # process answered, as the pprof form's comments do: the same lines, at
  # the top, then the report.
  def test_debug_1_text_starts_with_the_process_lines
    app = heap_app
    _, body = fetch(app, "/debug/fathom/heap", "debug=1")
    head = body.lines.take_while { |l| l != "\n" }.map(&:chomp)
    assert_equal "pid=#{Process.pid}", head[0], body
    assert_equal "hostname=#{Fathom::ProcessComments.hostname}", head[1]
    assert_equal "ruby=#{RUBY_VERSION} (#{RUBY_PLATFORM})", head[2]
    assert_match(/\Awindow=\d{4}-\d\d-\d\dT[\d:.]+Z\/\d{4}-/, head[3])
    assert_match(/^Type: inuse_space$/, body.lines.drop(head.size).join)

    # A Firefox profile's text (no pprof window): the reply's time instead.
    app = Fathom::Rack::App.new(enabled: true, max_seconds: 1)
    headers, body = fetch(app, "/debug/fathom/gc", "seconds=2&format=firefox&debug=1")
    assert_equal "1", headers["x-fathom-seconds-capped"]
    lines = body.lines.map(&:chomp)
    assert_equal "pid=#{Process.pid}", lines[0], body
    assert lines[1].start_with?("hostname=")
    assert_match(/\Atime=\d{4}-\d\d-\d\dT[\d:.]+Z\z/, lines[3])
    assert_equal "(seconds capped at 1)", lines[4]
    assert_match(/GC profile/, body)
  end

  def test_gc_pprof_and_firefox
    app = Fathom::Rack::App.new(enabled: true)
    _, body = fetch(app, "/debug/fathom/gc", "seconds=1")
    assert_includes Fathom::Pprof.read(body).sample_type_names, "gcs"
    headers, body = fetch(app, "/debug/fathom/gc", "seconds=1&format=firefox")
    assert_match(/filename="gc.json.gz"/, headers["content-disposition"])
    assert_equal "Fathom", JSON.parse(Zlib.gunzip(body)).dig("meta", "product")[/\AFathom/]
    _, body = fetch(app, "/debug/fathom/gc", "seconds=1&debug=1")
    assert_match(/GC profile/, body)
  end

  def test_mounted_with_map_and_at_another_prefix
    app = Fathom::Rack::App.new(enabled: true, prefix: "/ops/prof/")
    status, _, body = app.call(env("/", "").merge("SCRIPT_NAME" => "/ops/prof"))
    assert_equal 200, status
    assert_match(/heap/, body.join)
    assert_equal 200, app.call(env("/ops/prof/")).first
    inner = ->(_) { [200, {}, ["page"]] }
    assert_equal ["page"], Fathom::Rack::App.new(inner, enabled: true).call(env("/users"))[2]
  end

  def test_middleware_returns_the_request_profile_or_writes_it
    page = lambda do |_|
      Leaky.leak(1000)
      [200, { "content-type" => "text/html" }, ["<p>done</p>"]]
    end
    mw = Fathom::Rack::Middleware.new(page, enabled: true)
    assert_equal ["<p>done</p>"], mw.call(env("/report"))[2]
    status, headers, body = mw.call(env("/report", "fathom=heap"))
    assert_equal 200, status
    assert_match(/request-heap.pb.gz/, headers["content-disposition"])
    profile = Fathom::Pprof.read(body.join)
    i = profile.sample_type_index("inuse_space")
    leaked = profile.samples.select { |s| profile.stack_names(s).any? { |f| f.include?("Leaky.leak") } }.sum { |s| s.values[i] }
    assert_operator leaked, :>=, 1000 * 200

    mw = Fathom::Rack::Middleware.new(page, enabled: true, dir: @dir)
    status, headers, body = mw.call(env("/report", "fathom=gc"))
    assert_equal [200, ["<p>done</p>"]], [status, body]
    name = headers["x-fathom-profile"]
    assert_match(/\Arequest-gc-#{Process.pid}-\h{8}-\d{8}T\d{6}Z-\d+\.pb\.gz\z/, name)
    assert_includes Fathom::Pprof.read(File.binread(File.join(@dir, name))).sample_type_names, "gcs"
    assert_equal 400, mw.call(env("/report", "fathom=bogus")).first
    assert_equal 403, mw.call(env("/report", "fathom=heap").merge("REMOTE_ADDR" => "10.0.0.1")).first
  end

  def self.burn(seconds)
    deadline = Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID) + seconds
    x = 0
    x += 1 while Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID) < deadline
    x
  end

  def test_middleware_cpu_profiles_the_request
    page = ->(_) { [200, { "content-type" => "text/plain" }, [RackEndpointsTest.burn(0.3).to_s]] }
    mw = Fathom::Rack::Middleware.new(page, enabled: true)
    status, headers, body = mw.call(env("/busy", "fathom=cpu"))
    assert_equal 200, status, body.join
    assert_match(/request-cpu.pb.gz/, headers["content-disposition"])
    profile = Fathom::Pprof.read(body.join)
    i = profile.sample_type_index("cpu")
    total = profile.samples.sum { |s| s.values[i] }
    burning = profile.samples.select { |s| profile.stack_names(s).any? { |f| f.include?("burn") } }.sum { |s| s.values[i] }
    # Not luck: the CPU timer fires every ~10 ms of the thread's CPU (24-27
    # samples measured), and the CPU totals are sums of measured deltas.
    # Only the few us of middleware code around burn can be charged
    # elsewhere, at most one delta (<= 12.5 ms + a 4 ms tick) each side
    # of the 300 ms: burn holds > 85% (100% in 10 runs).
    assert_operator total, :>, 0
    assert_operator burning, :>, total / 2, "the request's CPU is in burn"
  end

  def test_profile_endpoint_is_409_while_another_cpu_profiler_runs
    @profiler = Fathom::CpuProfiler.new.start
    status, _, body = Fathom::Rack::App.new(enabled: true).call(env("/profile", "seconds=1"))
    assert_equal 409, status
    assert_match(/another CPU profiler/, body.join)
  end

  # A start error picks one of two fixed texts; its own message (which
  # could hold paths) never reaches the client.
  def test_a_start_refusal_names_mn_threads_and_nothing_else
    mn = Fathom::Rack::Refusal.could_not_start(Fathom::Error.new("fathom: x (RUBY_MN_THREADS) /secret/path"), "busy")
    assert_equal [409, Fathom::Rack::Refusal::MN_THREADS], [mn.status, mn.message]
    other = Fathom::Rack::Refusal.could_not_start(Fathom::Error.new("fathom: /secret/path"), "busy")
    assert_equal [409, "busy"], [other.status, other.message]
  end

  def test_middleware_refuses_when_always_on_holds_the_heap_hooks
    @profiler = Fathom::HeapProfiler.new.start
    mw = Fathom::Rack::Middleware.new(->(_) { [200, {}, ["page"]] }, enabled: true)
    status, _, body = mw.call(env("/", "fathom=heap"))
    assert_equal 409, status
    assert_match(/already running/, body.join)
  end
end
