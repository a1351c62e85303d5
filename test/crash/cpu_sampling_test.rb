# frozen_string_literal: true

require "test_helper"
require "support/profile_helpers"

# The CPU/wall profiler's crash-prone paths, in the normal and the ASan/UBSan
# builds: threads created and ended while sampling at 100 us, start/stop
# loops, stop with signals pending, fork, GC.compact and GC.stress while
# sampling, running with the heap and GC profilers, exit while sampling.
class CpuSamplingTest < Minitest::Test
  include ProfileHelpers

  def setup
    require_native!
  end

  def burn(seconds)
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + seconds
    x = 0
    x += 1 while Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
    x
  end

  def samples_of(profile)
    profile.decode.samples.sum { |s| s.values[0] }
  end

  # Work without the GVL beside GC.compact: zlib deflating a string. Not on
  # Ruby 3.1 under the ASan runtime, where Ruby alone crashes that way: a
  # script with one thread deflating and GC.compact in a loop, with no Fathom
  # loaded, died 3 runs in 5 with libasan preloaded (a SEGV on a heap page in
  # Ruby's compaction read barrier, on the deflating thread), ran 5 of 5
  # without it, and 5 of 5 on 3.3 with it. There the thread sleeps instead,
  # which also leaves the GVL but reads no Ruby object meanwhile.
  def work_off_the_gvl(data)
    if asan? && RUBY_VERSION < "3.2"
      sleep 0.001
    else
      Zlib::Deflate.deflate(data)
    end
  end

  %i[cpu wall].each do |mode|
    define_method("test_8_threads_started_and_stopped_while_sampling_at_100us_#{mode}") do
      profiler = Fathom::CpuProfiler.new(mode: mode, interval: "100us").start
      3.times do
        threads = 8.times.map do |i|
          Thread.new do
            Thread.current.name = "w#{i}"
            burn(0.02)
            sleep 0.01
            [1] * 100
          end
        end
        threads.each(&:join)
      end
      profiler.stop
      profile = profiler.flush
      assert_operator samples_of(profile), :>, 0
      assert_equal 0, Fathom::Native.internal_errors[:count]
    end

    define_method("test_start_stop_loop_with_signals_pending_#{mode}") do
      profiler = Fathom::CpuProfiler.new(mode: mode, interval: "50us")
      worker = Thread.new { burn(asan? ? 0.5 : 0.3) }
      30.times do
        profiler.start
        burn(0.002)
        profiler.stop # timers fire up to the last moment: signals may still be pending
      end
      worker.join
      profiler.flush
      burn(0.01) # pending signals arrive after stop: ignored, not fatal
      refute profiler.running?
    end

    # native: true unwinds C stacks in every handler: threads starting and
    # ending, zlib releasing the GVL, GC.compact moving objects meanwhile.
    define_method("test_native_frames_with_threads_zlib_and_gc_compact_at_100us_#{mode}") do
      require "zlib"
      data = Random.new(3).bytes(1 << 16) * 4
      profiler = Fathom::CpuProfiler.new(mode: mode, interval: "100us", native: true).start
      2.times do
        threads = 6.times.map { Thread.new { 3.times { work_off_the_gvl(data) }; [1] * 100 } }
        GC.compact
        threads.each(&:join)
        profiler.flush
      end
      profiler.stop
      profile = profiler.flush
      assert_kind_of String, profile.report(top: 3)
      assert_equal 0, Fathom::Native.internal_errors[:count]
    end

    # Threads in every state, entered before the profilers start (wall mode
    # on 3.2+ leaves those dormant until their first GVL event, whose hook
    # then samples them), while the heap sampler signals whoever holds the
    # GVL: start/stop loops, GC.compact and a fork in between, then the
    # threads wake (the dormant ones' first samples) while sampling.
    define_method("test_threads_in_every_state_with_the_heap_sampler_#{mode}") do
      require "zlib"
      stop = false
      r, w = IO.pipe
      data = Random.new(5).bytes(1 << 18) * 4
      sleeper = Thread.new { sleep }
      reader = Thread.new { r.read(1) }
      queue = Queue.new
      parked = Thread.new { queue.pop }
      nogvl = Thread.new { work_off_the_gvl(data) until stop }
      burner = Thread.new { x = 0; x += 1 until stop }
      Thread.pass until [sleeper, reader, parked].all? { |t| t.status == "sleep" }
      cpu = Fathom::CpuProfiler.new(mode: mode, interval: "200us")
      heap = Fathom::HeapProfiler.new(interval: "200us")
      kept = []
      3.times do |round|
        cpu.start
        heap.start
        deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + (asan? ? 0.15 : 0.05)
        kept << "x" * 10 while Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
        GC.compact if round == 1
        if round == 2
          pid = fork { kept << "child" * 3; exit!(0) }
          Process.wait(pid)
          assert_predicate $?, :success?
        end
        heap.stop
        cpu.stop
        heap.flush
        cpu.flush
      end
      cpu.start
      heap.start
      sleeper.wakeup
      w.write("x")
      queue << 1
      [sleeper, reader, parked].each(&:join)
      stop = true
      [nogvl, burner].each(&:join)
      heap.stop
      cpu.stop
      assert_kind_of String, cpu.flush.report(top: 3)
      assert_operator heap.stats[:bursts], :>, 0
      heap.flush
      assert_equal 0, Fathom::Native.internal_errors[:count]
    ensure
      stop = true
      [sleeper, reader, parked, nogvl, burner].compact.each { |t| t.kill.join(1) } # nil: setup raised
    end

    # With threads that nap, deflate without the GVL and end meanwhile: their
    # samples taken during GCs are held for a later stack, probed at their
    # RESUMED (3.2+), kept across flushes and forgotten when they end.
    define_method("test_gc_compact_and_stress_while_sampling_#{mode}") do
      require "zlib"
      done = false
      # Little allocation of their own: under GC.stress each one is a GC.
      napper = Thread.new do
        x = 0
        until done
          2000.times { x += 1 }
          sleep 0.001
        end
      end
      data = Random.new(3).bytes(1 << 16)
      deflater = Thread.new do
        until done
          work_off_the_gvl(data)
          sleep 0.002
        end
      end
      profiler = Fathom::CpuProfiler.new(mode: mode, interval: "100us").start
      kept = []
      5.times do
        deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 0.02
        kept << "x" * 10 while Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
        GC.compact
        profiler.flush
        Thread.new { sleep 0.002 }.join # a thread ends (its id may be the next one's on 3.1)
      end
      begin
        GC.stress = true
        30.times { kept << [1, 2, 3].map(&:to_s) } # GC.stress: ~25 ms per iteration
      ensure
        GC.stress = false
      end
      done = true
      [napper, deflater].each(&:join)
      profiler.stop
      profile = profiler.flush
      assert_kind_of String, profile.report(top: 3)
    end
  end

  def test_fork_while_sampling_child_profiles_itself
    profiler = Fathom::CpuProfiler.new(mode: :cpu, interval: "1ms").start
    burn(0.02)
    rd, wr = IO.pipe
    pid = fork do
      rd.close
      burn(0.1)
      profiler.stop
      profile = profiler.flush
      wr.write(samples_of(profile).to_s)
      wr.close
      exit!(0)
    end
    wr.close
    burn(0.05)
    Process.wait(pid)
    assert $?.success?, "the forked child exited cleanly"
    child_samples = rd.read.to_i
    assert_operator child_samples, :>, 0, "the child profiled itself"
    profiler.stop
    assert_operator samples_of(profiler.flush), :>, 0
  end

  def test_runs_with_the_heap_and_gc_profilers
    profiles = Fathom.profile(mode: %i[cpu heap gc], interval: "1ms") do
      threads = 2.times.map { Thread.new { 200.times { |i| "s#{i}" * 10; burn(0.0005) } } }
      threads.each(&:join)
    end
    assert_operator samples_of(profiles[:cpu]), :>, 0
    assert_equal :heap, profiles[:heap].kind
    assert_equal :cpu, profiles[:cpu].kind
  end

  # One Firefox file for all three (threads ending while sampled, a
  # compaction moving the heap profiler's frames, C frames): the combined
  # encode reads the CPU timeline, the GC periods and the heap's allocation
  # events together.
  def test_combined_firefox_file_with_threads_compaction_and_native_frames
    profiles = Fathom.profile(mode: %i[cpu heap gc], format: :firefox, native: true, interval: "1ms") do
      threads = 8.times.map { Thread.new { 100.times { |i| "s#{i}" * 10; burn(0.0003) } } }
      GC.compact if GC.respond_to?(:compact)
      threads.each(&:join)
    end
    assert_same profiles[:cpu], profiles[:heap]
    json = profiles[:cpu].firefox_json
    assert_operator json["threads"].size, :>=, 2
    assert json["threads"].any? { |t| t.key?("jsAllocations") }
  end

  # Fathom's own sleeping threads (the GC counters poller, the CPU drainer)
  # get no track in a wall profile, whichever started first; and once the
  # poller has ended, a program thread that Ruby 3.1 may put on its native
  # thread (same tid) is sampled again.
  def test_fathoms_own_threads_are_not_sampled
    gc = Fathom::GcProfiler.new(gc_source: :counters, coalesce: "10ms").start
    cpu = Fathom::CpuProfiler.new(mode: :wall, interval: "1ms").start
    own = Thread.list.select { |t| t.name.to_s.start_with?("fathom-") }
    assert_equal %w[fathom-cpu-drain fathom-gc-poll], own.map(&:name).sort
    own_tids = own.map(&:native_thread_id)
    sleep 0.1
    gc.stop
    gc.flush
    after = 3.times.map { |i| Thread.new { Thread.current.name = "after-#{i}"; sleep 0.05 } }
    after.each(&:join)
    cpu.stop
    threads = cpu.flush.decode.samples.map { |s| [s.labels["thread name"].to_s, Array(s.labels["thread id"]).first] }.uniq
    names = threads.map(&:first)
    refute names.any? { |n| n.start_with?("fathom-") }, "Fathom's threads sampled: #{threads}"
    # Only after-0..2 (which may reuse the poller's tid on 3.1) may carry one of those tids.
    threads.each { |name, tid| refute_includes own_tids, tid, "#{name} has the tid of one of Fathom's threads" unless name.start_with?("after-") }
    3.times { |i| assert_includes names, "after-#{i}" }
  end

  def test_exit_while_sampling_is_clean
    script = <<~RUBY
      require "fathom"
      Fathom::CpuProfiler.new(mode: :wall, interval: "100us").start
      4.times.map { Thread.new { loop { [1] * 10 } } }
      t = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 0.2
      nil while Process.clock_gettime(Process::CLOCK_MONOTONIC) < t
      exit 0
    RUBY
    env = TestHelper::PLAIN_ENV.merge(ENV.slice("FATHOM_EXT_PATH", "LD_PRELOAD", "ASAN_OPTIONS", "UBSAN_OPTIONS"))
    _out, err, status = Open3.capture3(env, RbConfig.ruby, "-I", TestHelper::LIB, "-e", script)
    assert status.success?, "exit while sampling: #{status.inspect} #{err}"
  end

  # Request labels: threads changing their labels and span id as fast as
  # they can while the SIGPROF handler reads them at 100 us and the heap
  # sampler's NEWOBJ hook reads them on sampled allocations; threads end
  # with labels still set (Ruby 3.1 reuses their native threads). 40
  # distinct sets only: the table is per process and bounded, and other
  # tests in this process intern their own.
  def test_threads_changing_labels_while_sampling_at_100us
    heap = Fathom::HeapProfiler.new.start
    profiler = Fathom::CpuProfiler.new(mode: :cpu, interval: "100us").start
    threads = 6.times.map do |t|
      Thread.new do
        2_000.times do |i|
          Fathom::Labels.with(endpoint: "e#{(t * 7 + i) % 20}", worker: "w#{t % 2}") do
            Fathom::Labels.span_id = i + 1
            [i.to_s] * 8
          end
        end
        Fathom::Labels.set(endpoint: "left set")
      end
    end
    threads.each(&:join)
    GC.compact
    profiler.stop
    heap.stop
    samples = profiler.flush.decode.samples
    assert_operator samples.size, :>, 0
    labelled = samples.select { |s| s.labels["endpoint"] }
    # Every labelled sample names a set some thread really had.
    assert labelled.all? { |s| s.labels["endpoint"].match?(/\Ae\d+\z|\Aleft set\z/) && s.labels["worker"].nil? == s.labels["endpoint"].start_with?("left") }
    refute_nil heap.flush
    assert_equal 0, Fathom::Native.internal_errors[:count]
  end

  def test_another_sigprof_owner_is_a_clear_error
    script = <<~RUBY
      trap("PROF") { }
      require "fathom"
      begin
        Fathom::CpuProfiler.new.start
      rescue Fathom::Error => e
        puts e.message
      end
    RUBY
    env = TestHelper::PLAIN_ENV.merge(ENV.slice("FATHOM_EXT_PATH", "LD_PRELOAD", "ASAN_OPTIONS", "UBSAN_OPTIONS"))
    out, err, status = Open3.capture3(env, RbConfig.ruby, "-I", TestHelper::LIB, "-e", script)
    assert status.success?, err
    assert_match(/SIGPROF already has a handler/, out)
  end

  def test_only_one_cpu_profiler_and_bad_options
    a = Fathom::CpuProfiler.new.start
    err = assert_raises(Fathom::Error) { Fathom::CpuProfiler.new(mode: :wall).start }
    assert_match(/already running/, err.message)
    a.stop
    assert_raises(ArgumentError) { Fathom::CpuProfiler.new(mode: :heap) }
    assert_raises(ArgumentError) { Fathom::CpuProfiler.new(interval: "1us") }
    assert_raises(TypeError) { Fathom::CpuProfiler.new(native: "yes") }
    assert_raises(ArgumentError) { Fathom.profile(mode: %i[cpu wall]) {} }
  end
end
