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
                                     "FATHOM_RACK" => "1", "SHOP_EXIT_NOTE" => "1" }.merge(env), workers: workers)
  end

  # The workers that ran their at_exit handlers (test/rails_app/config/puma.rb,
  # SHOP_EXIT_NOTE). Puma 6.6.1 on Ruby 3.3.8 sometimes hangs a worker's
  # shutdown and SIGKILLs it (test/rails/push_cluster_test.rb says how that
  # was found, without Fathom too): such a worker writes no file at exit.
  def exited_workers(workers)
    exited = @server.exited_pids & workers
    refute_empty exited, "no worker ran its at_exit handlers: #{@server.log_text.lines.last(40).join}"
    exited
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
    # cpu: a profiler of its own at 1 ms, paced by the thread's CPU clock.
    # /burn spends 300 ms of its CPU in ProductsController#burn, whose
    # stacks under puma are ~75 frames, within the default max_depth of
    # 128. CPU-clock timers expire on the kernel's tick (250 Hz here: 1 ms
    # asked gave 75 samples of ~4 ms), and each sample carries the CPU since
    # the last, so the samples naming the action hold its 300 ms: >= 10 of
    # them and >= 150 ms asserted, not luck.
    # /products cannot carry this assertion: its action only runs the
    # query (the views render under default_render, after it returns), a
    # few ms of CPU on a warm worker, so 0 to 4 samples name it (two runs
    # here; a CI run on 3.1 found no ProductsController#index there). Its
    # profile holds the rendering.
    page = @server.get("/products?fathom=cpu")
    assert_equal "request", page["x-fathom-source"]
    page_names = Fathom::Pprof.read(page.body).then { |p| p.samples.flat_map { |s| p.stack_names(s) }.uniq }
    assert_includes page_names, "ActionView::Template#render"
    cpu = @server.get("/burn?ms=300&fathom=cpu")
    assert_equal "request", cpu["x-fathom-source"]
    profile = Fathom::Pprof.read(cpu.body)
    count, cpu_ns = profile.sample_type_index("samples"), profile.sample_type_index("cpu")
    burn = profile.samples.select { |s| profile.stack_names(s).include?("ProductsController#burn") }
    why = "under the action: #{burn.sum { |s| s.values[count] }} samples, #{burn.sum { |s| s.values[cpu_ns] }} ns; " \
          "in all #{profile.samples.sum { |s| s.values[count] }}, deepest stack " \
          "#{profile.samples.map { |s| profile.stack_names(s).size }.max} frames"
    assert_operator burn.sum { |s| s.values[count] }, :>=, 10, why
    assert_operator burn.sum { |s| s.values[cpu_ns] }, :>=, 150_000_000, why
    text = @server.get("/products?fathom=cpu&debug=1").body
    assert_match(/^Process: pid (#{worker_pids.join("|")}) on /, text)
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

    # The window wrote two CPU files in the worker that answered: what came
    # before it, then the window itself.
    window_files = Dir.children(@dir).grep(/\Acpu-#{cpu["x-fathom-pid"]}-.*\.pb\.gz\z/)
    assert_equal 2, window_files.size, Dir.children(@dir).inspect

    master = @server.pid
    workers = worker_pids
    assert_equal 0, @server.stop.exitstatus.to_i
    files = Dir.children(@dir).grep(/\.pb\.gz\z/)
    by_pid = files.group_by { |f| f[/\A[a-z]+-(\d+)-/, 1].to_i }
    refute_includes by_pid.keys, master, files.inspect
    assert_empty by_pid.keys - workers, files.inspect
    # Each worker that ran its at_exit handlers wrote its last cpu and heap
    # windows. A worker puma SIGKILLed in its shutdown hang (see
    # exited_workers) wrote none at exit: its only files are the window's,
    # if it answered /profile (a CI run on 3.3 had exactly that).
    exited_workers(workers).each do |pid|
      assert_equal %w[cpu heap], by_pid.fetch(pid, []).map { |f| f[/\A[a-z]+/] }.uniq.sort, files.inspect
    end
  end
end
