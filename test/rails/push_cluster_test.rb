# frozen_string_literal: true

require "test_helper"
require "support/rails_app"
require "support/push_receiver"
require "support/pprof_raw"

# Issue 27's acceptance, as a fleet runs it: the suite's Rails app under
# puma in cluster mode (4 workers), FATHOM_MODE=cpu,heap,gc pushed to a
# loopback Pyroscope stand-in (PushReceiver: protoc decodes every request
# with pyroscope's message definitions), FATHOM_ENDPOINT_LABELS=1, under
# load for 30 s. No FATHOM_DIR: nothing is written to disk.
class PushClusterTest < Minitest::Test
  WORKERS = 4
  EVERY = 5
  LOAD_SECONDS = 30
  NAMES = %w[fathom_gc memory process_cpu].freeze

  def setup
    require_native!
    skip_unless_protoc!
    RailsApp.require!(self)
    @receiver = PushReceiver.new
  end

  def teardown
    @server&.stop
    @receiver&.close
  end

  # `threads` clients in turn on /burn?ms=30 and /products/1 until the
  # deadline; returns the CPU the burn actions said they used (X-Cpu-Ns).
  def load(seconds, threads: 6)
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + seconds
    burned = Array.new(threads, 0)
    codes = Hash.new(0)
    lock = Mutex.new
    clients = threads.times.map do |k|
      Thread.new do
        Net::HTTP.start("127.0.0.1", @server.port, read_timeout: 60) do |http|
          while Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
            res = http.get("/burn?ms=30")
            burned[k] += res["x-cpu-ns"].to_i
            other = http.get("/products/1")
            lock.synchronize { codes[res.code] += 1; codes[other.code] += 1 }
          end
        end
      end
    end
    clients.each(&:join)
    [burned.sum, codes]
  end

  def test_four_workers_push_every_mode_every_window_labelled_by_endpoint
    skip_unless_go!
    @server = RailsApp::Server.new({ "FATHOM_MODE" => "cpu,heap,gc", "FATHOM_PUSH" => @receiver.url,
                                     "FATHOM_EVERY" => "#{EVERY}s", "FATHOM_SERVICE" => "shop",
                                     "FATHOM_LABELS" => "region=eu", "FATHOM_ENDPOINT_LABELS" => "1",
                                     "SHOP_THREADS" => "3" }, workers: WORKERS)
    workers = @server.log_text.scan(/- Worker \d+ \(PID: (\d+)\) booted/).flatten
    assert_equal WORKERS, workers.uniq.size
    burned_ns, codes = load(LOAD_SECONDS)
    assert_equal ["200"], codes.keys, codes.inspect
    assert_equal 0, @server.stop.exitstatus.to_i
    refute_match(/fathom: push to .* dropped/, @server.log_text, "no profile lost")

    series = @receiver.requests.flat_map { |r| PushReceiver.decode(r) }
    by = series.group_by { |s| [s.label("pid"), s.label("__name__")] }
    assert_empty series.map { |s| s.label("pid") }.uniq - workers, "only the workers push (the master does not profile)"
    workers.product(NAMES).each do |pid, name|
      list = by.fetch([pid, name]) { flunk("worker #{pid} pushed no #{name}: #{by.keys.inspect}") }
      # The load alone spans LOAD_SECONDS / EVERY windows; the worker ran
      # from boot to its stop, so at least that many (and the last one).
      assert_operator list.size, :>=, LOAD_SECONDS / EVERY, "#{pid} #{name}: a series per window"
      list.each do |s|
        assert_equal %w[shop eu false], [s.label("service_name"), s.label("region"), s.label("__delta__")]
        refute_nil s.label("hostname")
        assert_equal RUBY_VERSION, s.label("ruby_version")
      end
      # Each window once: the windows of one worker's mode do not overlap.
      windows = list.map { |s| Fathom::Pprof.read(s.samples.first.raw_profile) }
                    .map { |p| [p.time_nanos, p.time_nanos + p.duration_nanos] }.sort
      windows.each_cons(2) { |(_, e1), (s2, _)| assert_operator s2, :>=, e1 - 1_000_000, "#{pid} #{name}: overlapping windows" }
    end

    # go tool pprof reads what was pushed (one of each mode; Fathom's own
    # reader decoded every one above).
    NAMES.each do |name|
      raw = series.find { |s| s.label("__name__") == name }.samples.first.raw_profile
      Dir.mktmpdir do |dir|
        File.binwrite(File.join(dir, "p.pb.gz"), raw)
        refute_empty PprofRaw.read(File.join(dir, "p.pb.gz")).sample_types, name
      end
    end

    # The CPU labelled ProductsController#burn is the CPU those actions
    # used (X-Cpu-Ns, each action's own thread clock), within 10%. Each
    # sample weighs the CPU its thread used since its previous sample, so
    # the CPU is counted once whatever the sampling; what can move is the
    # share around each request's label boundaries (at most one interval,
    # 10 ms +-25%, either way, around ~1,000 requests of 30 ms: a sum of
    # independent errors, its spread ~1% of the total; 10% is many
    # spreads away) and the action's few lines outside the measured loop.
    endpoint_ns = series.select { |s| s.label("__name__") == "process_cpu" }.sum do |s|
      profile = Fathom::Pprof.read(s.samples.first.raw_profile)
      cpu = profile.sample_type_index("cpu")
      profile.samples.select { |x| x.labels["endpoint"] == "ProductsController#burn" }.sum { |x| x.values[cpu] }
    end
    if ENV["FATHOM_TEST_VERBOSE"]
      puts format("\npushed %d series; labelled ProductsController#burn %.2f s, actions measured %.2f s (ratio %.3f)",
                  series.size, endpoint_ns / 1e9, burned_ns / 1e9, endpoint_ns.fdiv(burned_ns))
    end
    assert_operator burned_ns, :>, 5e9, "the load burned too little to compare"
    assert_in_delta 1.0, endpoint_ns.fdiv(burned_ns), 0.10,
                    "labelled #{endpoint_ns / 1e9} s of CPU, the actions measured #{burned_ns / 1e9} s"
    show = series.select { |s| s.label("__name__") == "process_cpu" }.any? do |s|
      Fathom::Pprof.read(s.samples.first.raw_profile).samples.any? { |x| x.labels["endpoint"] == "ProductsController#show" }
    end
    assert show, "the other endpoint has its own label"
  end

  # The backend is down (nothing listens on its port): the workers serve
  # every request, each keeps at most its queue (8 profiles) and, at stop,
  # says how many it lost. Throughput against a baseline is a benchmark
  # (bench/rack_load.rb --always-on-set --push-down), not asserted here.
  #
  # "Each" is each worker that ran its at_exit handlers (SHOP_EXIT_NOTE).
  # Puma 6.6.1 on Ruby 3.3.8 sometimes hangs a worker's shutdown: its
  # server thread's IO#close waits forever for the "wrkr check" thread,
  # blocked in IO#wait_readable on the same fd; the master SIGKILLs the
  # worker after worker_shutdown_timeout, and no at_exit runs. Seen in 1 of
  # 4-12 runs beside two CPU hogs, with Fathom and without it (FATHOM_*
  # unset: the same stacks, gdb), so it is not Fathom's; Fathom's lines can
  # only come from the workers that exit.
  def test_backend_down_every_request_served_and_losses_counted
    port = TCPServer.open("127.0.0.1", 0) { |s| s.addr[1] }
    @server = RailsApp::Server.new({ "FATHOM_MODE" => "cpu,heap,gc", "FATHOM_PUSH" => "pyroscope://127.0.0.1:#{port}",
                                     "FATHOM_EVERY" => "1s", "FATHOM_ENDPOINT_LABELS" => "1",
                                     "SHOP_EXIT_NOTE" => "1" }, workers: 2)
    workers = @server.log_text.scan(/- Worker \d+ \(PID: (\d+)\) booted/).flatten
    _burned, codes = load(8, threads: 4)
    assert_equal ["200"], codes.keys, codes.inspect
    assert_equal 0, @server.stop.exitstatus.to_i
    exited = @server.exited_pids & workers.map(&:to_i)
    refute_empty exited, "no worker ran its at_exit handlers: #{@server.log_text.lines.last(40).join}"
    losses = @server.log_text.scan(/fathom: push to (\S+): (\d+) profiles sent, (\d+) dropped, (\d+) failed \(last error: ([^)]*)\)/)
    assert_equal exited.size, losses.size, @server.log_text.lines.last(40).join
    losses.each do |url, sent, dropped, failed, error|
      assert url.start_with?("http://127.0.0.1:#{port}/"), url
      assert_equal 0, sent.to_i
      # 8 s at 1 s, 3 modes: at least 24 windows per worker, every one
      # either dropped from the full queue, dropped at stop, or failed
      # after its retries.
      assert_operator dropped.to_i + failed.to_i, :>=, 24
      assert_match(/refused|ECONNREFUSED/i, error)
    end
  end
end
