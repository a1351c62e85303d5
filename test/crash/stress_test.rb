# frozen_string_literal: true

require "test_helper"
require "support/profile_helpers"

# The crash-prone paths, run in the normal and the ASan/UBSan builds:
# GC.compact during profiling, GC.stress windows, threads allocating while
# another flushes, many start/stop cycles, fork.
class StressTest < Minitest::Test
  include ProfileHelpers

  class Churn
    def work(n, keep)
      n.times { |i| keep << "s#{i}" * 3 if i % 10 == 0 }
      keep
    end
  end

  def setup
    require_native!
  end

  [true, false].each do |exact|
    mode = exact ? "exact" : "sampled"

    define_method("test_gc_compact_during_profiling_#{mode}") do
      kept = []
      with_profiler(exact: exact, interval: 0.00005) do |profiler|
        5.times do
          # At least 20 ms of work per round, whatever the build's speed.
          deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 0.02
          Churn.new.work(2_000, kept) while Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
          GC.compact
          profiler.flush
        end
        profile = profiler.flush(gc: true)
        # Sampled: >= 100 ms of Ruby CPU at 50 us made 65-184 bursts (6
        # runs); every other allocation is a kept string, a candidate kept
        # with p = 40/S ~ 1/4: P(no live sample) <= (1 - 1/8)^(64 x 65)
        # < e^-500 (measured 306-965).
        assert_operator profile.stats[:live_samples], :>, 0
      end
    end

    define_method("test_gc_stress_window_#{mode}") do
      kept = []
      with_profiler(exact: exact, interval: 0.00005) do |profiler|
        begin
          GC.stress = true
          Churn.new.work(asan? ? 100 : 400, kept)
        ensure
          GC.stress = false
        end
        profiler.flush(gc: true)
      end
    end

    define_method("test_threads_allocate_while_another_flushes_#{mode}") do
      with_profiler(exact: exact, interval: 0.00005) do |profiler|
        threads = 4.times.map do |t|
          Thread.new do
            Thread.current.name = "worker-#{t}"
            kept = []
            # A bounded amount of work (150 ms of this thread's CPU): on Ruby
            # 3.1 a flush that yields the GVL to four busy threads waits out
            # their 100 ms time slices, so unbounded workers would starve it.
            cpu = -> { Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID) }
            deadline = cpu.call + 0.15
            while cpu.call < deadline
              Churn.new.work(2_000, kept)
              kept.clear if kept.size > 50_000
            end
            kept.size
          end
        end
        profiles = []
        profiles << profiler.flush while threads.any?(&:alive?) && profiles.size < 50
        threads.each(&:join)
        profiles << profiler.flush(gc: true)
        assert(profiles.all? { |p| p.bytes.bytesize > 0 })
        if PprofRaw.go_available?
          seen = profiles.flat_map { |p| raw_of(p).by_label("alloc_objects", "thread").keys }.uniq
          # Sampled: ticks follow the GVL holder's CPU; each worker runs
          # 150 ms of it, and got 1,651-6,586 samples (~16 a burst; 20 runs
          # x 4 workers). Bursts per worker Poisson(>= 100): P(>= 3 of the 4
          # get none) <= 4 e^-300.
          assert_operator (seen & %w[worker-0 worker-1 worker-2 worker-3]).size, :>=, (exact ? 4 : 2), seen.inspect
        end
      end
    end

    define_method("test_start_stop_cycles_#{mode}") do
      profiler = Fathom::HeapProfiler.new(exact: exact, interval: 0.00005)
      kept = []
      100.times do |i|
        profiler.start
        Churn.new.work(200, kept)
        profiler.stop
        profiler.flush if i % 10 == 0
      end
      refute profiler.running?
      profiler.flush(gc: true)
    end

    define_method("test_fork_child_profiles_itself_#{mode}") do
      skip "fork unsupported" unless Process.respond_to?(:fork)
      with_profiler(exact: exact, interval: 0.00005) do |profiler|
        Churn.new.work(2_000, [])
        reader, writer = IO.pipe
        pid = fork do
          reader.close
          kept = []
          # Work for at least 50 ms and until the child has sampled (bounded:
          # a dead timer thread in the child fails the test, not hangs it).
          # Sampled: until 4 bursts ended in the child (it made 3-8 in
          # 50 ms). Waiting for 6 candidates only could stop in the child's
          # first burst: P(none of 6 kept) = (3/4)^6 = 0.18 when its timer
          # started late. >= 3 whole bursts, 192 candidates kept with
          # p = 40/S, S falling from at most 1 KB: P(no sample) < 4e-13.
          start = Process.clock_gettime(Process::CLOCK_MONOTONIC)
          taken = profiler.stats[:samples_taken]
          bursts = profiler.stats[:bursts]
          loop do
            Churn.new.work(2_000, kept)
            elapsed = Process.clock_gettime(Process::CLOCK_MONOTONIC) - start
            sampled = exact ? profiler.stats[:samples_taken] > taken + 5 : profiler.stats[:bursts] >= bursts + 4
            break if elapsed > 5 || (elapsed > 0.05 && sampled)
          end
          profile = profiler.flush(gc: true)
          writer.write([profile.stats[:samples], profile.bytes.bytesize].join(","))
          writer.close
          exit!(profiler.running? ? 0 : 3)
        end
        writer.close
        Churn.new.work(2_000, [])
        _, status = Process.wait2(pid)
        samples, bytes = reader.read.split(",").map(&:to_i)
        assert status.success?, "child failed: #{status.inspect}"
        assert_operator samples, :>, 0 # sampled: P(0) < 4e-13, at the child's loop
        assert_operator bytes, :>, 0
        assert profiler.running?
        profiler.flush
      end
    end
  end

  # The child exits through an exception and at_exit while the profiler (and
  # its timer thread) still runs: process teardown must not crash.
  def test_fork_child_exits_with_exception_while_profiling
    with_profiler(interval: 0.00005) do
      pid = fork do
        $stderr.reopen(File::NULL)
        Churn.new.work(5_000, [])
        raise "boom in child"
      end
      _, status = Process.wait2(pid)
      assert_equal 1, status.exitstatus, "child died of #{status.inspect}"
    end
  end

  def test_only_one_profiler_runs_at_a_time
    a = Fathom::HeapProfiler.new
    b = Fathom::HeapProfiler.new
    a.start
    assert_raises(Fathom::Error) { b.start }
  ensure
    a&.stop
  end
end
