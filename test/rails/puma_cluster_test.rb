# frozen_string_literal: true

require "test_helper"
require "support/rails_app"

# The suite's Rails app under puma in cluster mode (2 workers, preload_app!)
# with the Railtie's FATHOM_DIR (always-on heap and GC) and FATHOM_RACK=1
# (endpoints and ?fathom= per request), as a production deploy runs it.
class PumaClusterTest < Minitest::Test
  def setup
    require_native!
    RailsApp.require!(self)
    @dir = Dir.mktmpdir("fathom-rails-puma")
  end

  def teardown
    @server&.stop
    FileUtils.rm_rf(@dir)
  end

  def start(workers: 2, **env)
    @server = RailsApp::Server.new({ "FATHOM_DIR" => @dir, "FATHOM_MODE" => "heap,gc", "FATHOM_EVERY" => "3600s",
                                     "FATHOM_RACK" => "1" }.merge(env), workers: workers)
  end

  def comments(bytes)
    Fathom::Pprof.read(bytes).comments
  end

  def worker_pids
    @server.log_text.scan(/- Worker \d+ \(PID: (\d+)\) booted/).flatten.map(&:to_i)
  end

  def test_always_on_in_the_workers_endpoints_and_per_request_profiles
    start
    log = @server.log_text
    refute_match(/Thread\(s\) started in app boot/, log, "always-on starts in the workers, after fork")
    assert_equal "200", @server.get("/products").code

    heap = @server.get("/debug/fathom/heap")
    assert_equal "200", heap.code, heap.body
    pid = comments(heap.body).find { |c| c.start_with?("pid=") }.to_s.delete_prefix("pid=").to_i
    assert_includes worker_pids, pid, "a worker answered"

    # The GC endpoint while always-on GC runs: a window of it, not a 409.
    gc = @server.get("/debug/fathom/gc?seconds=1")
    assert_equal "200", gc.code, gc.body
    assert_equal "gc", Fathom::Profile.new(gc.body, {}, kind: :gc, format: :pprof).kind.to_s

    # ?fathom= on an ordinary request (the Railtie wires the middleware).
    # heap and gc come from the always-on profilers (a window of them).
    %w[heap gc].each do |kind|
      res = @server.get("/products?fathom=#{kind}")
      assert_equal "200", res.code, res.body
      assert_equal "always-on", res["x-fathom-source"]
      assert_equal "application/octet-stream", res["content-type"]
    end
    # cpu: a profiler of its own at 1 ms. The page takes >= 0.2 s of CPU
    # (0.3-0.4 s measured): >= 200 samples by the CPU clock, most under
    # the action; asserting one is not luck.
    cpu = @server.get("/products?fathom=cpu")
    assert_equal "request", cpu["x-fathom-source"]
    profile = Fathom::Pprof.read(cpu.body)
    names = profile.samples.flat_map { |s| profile.stack_names(s) }.uniq
    assert_includes names, "ProductsController#index"
    text = @server.get("/products?fathom=cpu&debug=1").body
    assert_match(/^pid=(#{worker_pids.join("|")})$/, text)
    assert_match(/puma srv tp/, text)
    assert_equal "400", @server.get("/products?fathom=cpu&interval=2h").code # above the 1 h cap

    # Only the workers wrote files, each its own, at exit (SIGTERM).
    master = @server.pid
    workers = worker_pids
    assert_equal 0, @server.stop.exitstatus.to_i
    files = Dir.children(@dir).grep(/\.pb\.gz\z/)
    pids = files.map { |f| f[/\A[a-z]+-(\d+)-/, 1].to_i }.uniq
    refute_includes pids, master, "the idle master writes nothing: #{files}"
    assert_empty pids - workers, files.inspect
    assert_equal %w[gc heap], files.map { |f| f[/\A[a-z]+/] }.uniq.sort
  end

  # Always-on CPU in the workers (issue 27): /profile is a window of it in
  # whichever worker answers (X-Fathom-Pid says which), a /heap fetch is
  # served while a /profile runs (a lock per kind), and at SIGTERM each
  # worker writes its last cpu and heap files; the master none.
  def test_always_on_cpu_in_the_workers
    start("FATHOM_MODE" => "cpu,heap")
    assert_equal "200", @server.get("/products").code
    profile = Thread.new { @server.get("/debug/fathom/profile?seconds=3") }
    sleep 1
    heap = @server.get("/debug/fathom/heap")
    assert_equal "200", heap.code, heap.body
    assert_includes worker_pids, heap["x-fathom-pid"].to_i
    cpu = profile.value
    assert_equal "200", cpu.code, cpu.body
    assert_equal "always-on", cpu["x-fathom-source"]
    assert_includes worker_pids, cpu["x-fathom-pid"].to_i
    assert_includes comments(cpu.body), "pid=#{cpu["x-fathom-pid"]}"

    master = @server.pid
    workers = worker_pids
    assert_equal 0, @server.stop.exitstatus.to_i
    files = Dir.children(@dir).grep(/\.pb\.gz\z/)
    by_pid = files.group_by { |f| f[/\A[a-z]+-(\d+)-/, 1].to_i }
    refute_includes by_pid.keys, master, files.inspect
    assert_equal workers.sort, by_pid.keys.sort, files.inspect
    by_pid.each_value { |names| assert_equal %w[cpu heap], names.map { |f| f[/\A[a-z]+/] }.uniq.sort }
  end
end
