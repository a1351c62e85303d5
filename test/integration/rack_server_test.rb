# frozen_string_literal: true

require "test_helper"
require "support/pprof_raw"
require "support/rack_server"
require "fathom/files/rotation"

# The issue's acceptance, against a real server: puma + a Sinatra app with a
# leaking route, profiled through `go tool pprof URL` as a Go developer
# would, and always-on files from RUBYOPT=-rfathom/setup.
class RackServerTest < Minitest::Test
  LEAK = 120_000 # bytes kept per GET /leak ("session-data" * 10_000)

  def setup
    require_native!
    (why = RackServer.elsewhere) && skip(why)
    skip_unless_go!
    if (why = RackServer.missing)
      flunk(why) if TestHelper.ci?
      skip(why)
    end
    @dir = Dir.mktmpdir("fathom-always-on")
  end

  def teardown
    @server&.stop
    FileUtils.rm_rf(@dir) if @dir
  end

  def start_server(env = {})
    @server = RackServer.new({ "RUBYOPT" => "-rfathom/setup", "FATHOM_DIR" => @dir }.merge(env))
  end

  # `go tool pprof -raw -symbolize=none URL`, parsed.
  def pprof_url(path)
    PprofRaw.new(go_pprof("-raw", "-symbolize=none", "-timeout", "60", @server.url(path)))
  end

  # Exact mode: the test is about what the endpoint serves, and a sampled
  # profile of 500 requests rests on a handful of samples of the 120 kB
  # string (one in ~300 of a request's allocations; sampling accuracy has
  # its own tests and bench/accuracy.rb).
  def test_heap_over_http_points_at_the_leaking_route
    start_server("FATHOM_MODE" => "heap", "FATHOM_EXACT" => "1", "FATHOM_EVERY" => "3600s")
    @server.load("/leak", 500)
    raw = pprof_url("/debug/fathom/heap")
    total = raw.total("inuse_space")
    leak = raw.cum("inuse_space", "LeakyApp#remember_session")
    assert_operator leak, :>, total / 2, "the leak holds most live bytes:\n#{raw.output[0, 3000]}"
    biggest = raw.samples.max_by { |s| s.values[raw.index_of("inuse_space")] }
    assert_includes biggest.functions, "LeakyApp#remember_session"
    assert_in_delta LEAK * 500, leak, LEAK * 500 * 0.05
    assert_includes raw.output, "Comment: ruby=#{RackServer.ruby_version}"

    allocs = go_pprof("-top", "-symbolize=none", @server.url("/debug/fathom/allocs"))
    assert_match(/Type: alloc_space/, allocs)
  end

  def test_gc_over_http_while_the_app_works
    start_server("FATHOM_MODE" => "heap", "FATHOM_EVERY" => "3600s")
    load = Thread.new { @server.load("/churn", 3000) }
    raw = pprof_url("/debug/fathom/gc?seconds=2")
    load.join
    assert_operator raw.total("gcs"), :>, 0, raw.output[0, 2000]
    # cpu: the one time column of both sources (the counters, the default
    # on Ruby < 3.3, measure no wall time).
    assert_equal raw.total("cpu"), raw.cum("cpu", "Garbage Collection")
    assert_equal ["GC"], raw.by_label("gcs", "thread").keys
  end

  # profile?seconds=N: the CPU profiler's pprof over HTTP, as Go's
  # /debug/pprof/profile; the busy route is where the CPU went.
  def test_cpu_profile_over_http_points_at_the_busy_route
    start_server("FATHOM_MODE" => "heap", "FATHOM_EVERY" => "3600s")
    busy = true
    load = Thread.new { @server.load("/burn", 20) while busy }
    raw = pprof_url("/debug/fathom/profile?seconds=2")
    busy = false
    load.join
    cpu = raw.total("cpu")
    assert_operator cpu, :>, 0, raw.output[0, 2000]
    # The share is of measured CPU deltas, each charged to the stack its
    # sample lands in: n >= 134 samples in the 2 s (5 runs), each in burn
    # with f = 0.84 (its CPU share; 0.82-0.88 measured). Binomial, deltas
    # alike: P(Bin(130, 0.8) <= 65) = 2e-14; unequal deltas (jitter +-25%,
    # 4 ms ticks) at most double the variance: 6.6 sd, < 1e-10.
    assert_operator raw.cum("cpu", "LeakyApp#burn"), :>, cpu / 2, raw.output[0, 3000]
    assert_includes raw.sample_types, "wall"
  end

  def test_retention_over_http_names_the_leaking_constant
    start_server("FATHOM_MODE" => "heap", "FATHOM_EVERY" => "3600s")
    @server.load("/leak", 500)
    raw = pprof_url("/debug/fathom/retention")
    held = raw.cum("inuse_space", /LeakyApp::SESSIONS/)
    assert_operator held, :>=, LEAK * 500, raw.output[0, 2000]
    # No other named constant, ivar or global holds as much.
    named = raw.function_names.grep(/::[A-Z]\w* \(|@\w+ \(|\$\w+ \(/) - raw.function_names.grep(/LeakyApp::SESSIONS/)
    named.each { |f| assert_operator raw.cum("inuse_space", f), :<, held, f }
  end

  def test_always_on_rotates_atomically_and_survives_sigterm
    start_server("FATHOM_MODE" => "heap,gc", "FATHOM_EVERY" => "0.5s", "FATHOM_KEEP" => "4")
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 4
    @server.load("/", 20) while Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
    files = Dir.children(@dir) - [Fathom::Files::Rotation::LOCK_NAME] # the rotation's lock, hidden
    # Rotated per process and mode (FATHOM_KEEP): 8 files of each written by now, 4 of each kept.
    files.group_by { |f| f[/\A[a-z]+/] }.each_value { |names| assert_operator names.size, :<=, 4, files.inspect }
    load = Thread.new do
      @server.load("/churn", 100_000)
    rescue StandardError
      nil # the server goes away under it
    end
    sleep 0.3
    status = @server.stop("TERM")
    load.join
    assert status, "puma stopped on SIGTERM"
    files = Dir.children(@dir)
    assert_empty files.grep(/fathom-tmp/), "no partial (temporary) file left"
    files -= [Fathom::Files::Rotation::LOCK_NAME] # the rotation's lock
    files.group_by { |f| f[/\A[a-z]+/] }.each_value { |names| assert_operator names.size, :<=, 4, files.inspect }
    assert_equal %w[gc heap], files.map { |f| f[/\A[a-z]+/] }.uniq.sort, files.inspect # the last of each mode
    files.each do |name|
      path = File.join(@dir, name)
      assert_match(/\A(heap|gc)-#{@server.pid}-\h{8}-\d{8}T\d{6}Z-\d+\.pb\.gz\z/, name)
      assert Fathom::Files::AtomicFile.written_by_fathom?(path)
      comments = go_pprof("-comments", path)
      assert_includes comments, "pid=#{@server.pid}"
      assert_includes comments, "ruby=#{RackServer.ruby_version}"
      assert_match(/^window=\S+Z\/\S+Z$/, comments)
      PprofRaw.read(path) # decodes whole
    end
  end
end
