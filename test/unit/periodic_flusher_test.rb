# frozen_string_literal: true

require "test_helper"
require "fathom/always_on/always_on"

# Uses a fake profiler: the flusher only needs #flush(gc:) -> Fathom::Profile.
class PeriodicFlusherTest < Minitest::Test
  class FakeProfiler
    attr_reader :gc_args

    # failures: how many flushes raise `error` first.
    def initialize(failures: 0, error: IOError)
      @failures = failures
      @error = error
      @gc_args = []
      @lock = Mutex.new
    end

    def flush(gc: false)
      @lock.synchronize do
        @gc_args << gc
        if @failures.positive?
          @failures -= 1
          raise @error, "simulated flush failure"
        end
      end
      Fathom::Profile.new("profile of #{Process.pid}".b, { samples: 0 })
    end
  end

  NAME_RE = /\Aheap-(\d+)-\h{8}-(\d{8}T\d{6}Z)-(\d+)\.pb\.gz\z/.freeze

  def setup
    @dir = Dir.mktmpdir("fathom-flusher")
  end

  def teardown
    @flusher&.stop
    FileUtils.rm_rf(@dir)
  end

  def files
    Dir.children(@dir).sort_by { |f| f[NAME_RE, 3].to_i }
  end

  def wait_for(timeout = 5)
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + timeout
    until yield
      flunk "timed out" if Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline
      sleep 0.01
    end
  end

  def test_writes_files_periodically_and_once_more_on_stop
    profiler = FakeProfiler.new
    @flusher = Fathom::PeriodicFlusher.new(profiler, dir: File.join(@dir, "sub"), interval: 0.02, gc: true).start
    assert @flusher.running?
    @dir = File.join(@dir, "sub") # created on first write
    wait_for { Dir.exist?(@dir) && files.size >= 3 }
    last = @flusher.stop
    @flusher = nil
    names = files
    assert_equal File.join(@dir, names.last), last
    names.each do |name|
      m = NAME_RE.match(name)
      assert m, "unexpected file #{name}"
      assert_equal Process.pid.to_s, m[1]
      assert_equal "profile of #{Process.pid}", File.binread(File.join(@dir, name))
    end
    indices = names.map { |n| n[NAME_RE, 3].to_i }
    assert_equal (indices.first..indices.last).to_a, indices, "indices must count up without gaps"
    assert(profiler.gc_args.all?(true))
    count = names.size
    sleep 0.06
    assert_equal count, files.size, "no writes after stop"
  end

  def test_custom_pattern
    @flusher = Fathom::PeriodicFlusher.new(FakeProfiler.new, dir: @dir, interval: 60, pattern: "p-%{index}.pb.gz").start
    path = @flusher.stop
    @flusher = nil
    assert_match(%r{/p-\d+\.pb\.gz\z}, path)
  end

  def test_flush_errors_are_reported_and_do_not_stop_the_thread
    profiler = FakeProfiler.new(failures: 2)
    _, err = capture_io do
      @flusher = Fathom::PeriodicFlusher.new(profiler, dir: @dir, interval: 0.01).start
      wait_for { files.size >= 2 }
      @flusher.stop
      @flusher = nil
    end
    assert_equal 2, err.scan(/fathom: periodic flush to .* failed: IOError: simulated flush failure/).size, err
  end

  def test_start_twice_and_stop_when_stopped
    @flusher = Fathom::PeriodicFlusher.new(FakeProfiler.new, dir: @dir, interval: 60)
    assert_nil @flusher.stop
    @flusher.start
    assert_raises(Fathom::Error) { @flusher.start }
    refute_nil @flusher.stop
    refute @flusher.running?
    @flusher = nil
  end

  def test_stop_is_prompt_with_a_long_interval
    @flusher = Fathom::PeriodicFlusher.new(FakeProfiler.new, dir: @dir, interval: 3600).start
    started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    @flusher.stop
    @flusher = nil
    assert_operator Process.clock_gettime(Process::CLOCK_MONOTONIC) - started, :<, 1
  end

  def test_fork_child_gets_its_own_thread_and_files
    skip "fork unsupported" unless Process.respond_to?(:fork)
    @flusher = Fathom::PeriodicFlusher.new(FakeProfiler.new, dir: @dir, interval: 0.02).start
    wait_for { files.any? }
    child = fork do
      deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 5
      sleep 0.01 until Dir.children(@dir).count { |f| f.start_with?("heap-#{Process.pid}-") } >= 2 ||
                       Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline
      @flusher.stop
      exit!(0)
    end
    _, status = Process.wait2(child)
    assert status.success?
    child_files = files.select { |f| f[NAME_RE, 1] == child.to_s }
    assert_operator child_files.size, :>=, 3, "child should flush periodically and on stop: #{files}"
    assert_equal (1..child_files.size).to_a, child_files.map { |f| f[NAME_RE, 3].to_i }, "child's index restarts at 1"
    child_files.each { |f| assert_equal "profile of #{child}", File.binread(File.join(@dir, f)) }
    tokens = files.map { |f| f.split("-")[2] }.uniq
    assert_equal 2, tokens.size, "the child names its files with a token of its own: #{files}"
    assert @flusher.running?, "parent flusher keeps running"
  end

  # Issue 10, item 9: a thread that died left running? true, and stop
  # re-raised its error without writing the final file.
  def test_a_thread_that_dies_is_reported_and_stop_still_writes_the_last_file
    profiler = FakeProfiler.new(failures: 1, error: NotImplementedError) # not a StandardError
    _, err = capture_io do
      @flusher = Fathom::PeriodicFlusher.new(profiler, dir: @dir, interval: 0.01).start
      wait_for { !@flusher.running? }
    end
    assert_match(/fathom: the periodic flusher's thread .* ended: NotImplementedError: simulated flush failure/, err)
    assert_match(/NotImplementedError/, @flusher.stats[:thread_error])
    path = @flusher.stop
    @flusher = nil
    assert path && File.exist?(path), "stop writes the final file"
  end

  def test_a_killed_thread_is_reported_and_stop_still_writes_the_last_file
    @flusher = Fathom::PeriodicFlusher.new(FakeProfiler.new, dir: @dir, interval: 3600).start
    thread = Thread.list.find { |t| t.name == "fathom-flusher" }
    thread.kill
    thread.join
    refute @flusher.running?
    assert_equal "killed", @flusher.stats[:thread_error]
    assert File.exist?(@flusher.stop)
    @flusher = nil
  end

  def test_start_again_after_the_thread_died
    @flusher = Fathom::PeriodicFlusher.new(FakeProfiler.new, dir: @dir, interval: 3600).start
    Thread.list.find { |t| t.name == "fathom-flusher" }.tap(&:kill).join
    @flusher.start
    assert @flusher.running?
    assert_nil @flusher.stats[:thread_error]
  end

  def test_flush_errors_are_counted
    profiler = FakeProfiler.new(failures: 2)
    capture_io do
      @flusher = Fathom::PeriodicFlusher.new(profiler, dir: @dir, interval: 0.01).start
      wait_for { files.size >= 1 }
    end
    stats = @flusher.stats
    assert_equal 2, stats[:errors]
    assert_equal "IOError: simulated flush failure", stats[:last_error]
    assert_nil stats[:thread_error]
  end

  def test_stats_before_start
    stats = Fathom::PeriodicFlusher.new(FakeProfiler.new, dir: @dir, interval: 1).stats
    assert_equal 1_000_000_000, stats[:interval_ns]
    assert_equal 0, stats[:files_written]
    assert_equal 0, stats[:skipped_ticks]
  end

  # Issue 10, item 12: with the main thread busy in Ruby code (holding the
  # GVL), the flusher wrote 3 files in 4 s at a 0.2 s interval: every
  # syscall of the write gave the GVL away, and each time the thread got it
  # back only at the busy thread's next time slice (100 ms). Now the write
  # is one native call, and the schedule is at a fixed rate.
  def test_keeps_the_interval_with_a_busy_main_thread
    require_native!
    @flusher = Fathom::PeriodicFlusher.new(FakeProfiler.new, dir: @dir, interval: 0.2).start
    started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    x = 0
    x += 1 while Process.clock_gettime(Process::CLOCK_MONOTONIC) - started < 2.5
    written = files.size
    stats = @flusher.stats
    # About 12 expected; before the fix, 1 or 2.
    assert_operator written, :>=, 7, "#{written} files in 2.5 s at 0.2 s; stats: #{stats}"
    assert_operator stats[:flushes_on_tick], :>=, written
    assert_operator stats[:max_late_by_ns], :>, 0, "a busy main thread delays the flusher, and stats say so"
    %i[late_by_ns late_flushes skipped_ticks flush_ns max_flush_ns].each { |k| assert_kind_of Integer, stats[k], k }
  end

  # Two containers sharing a volume, both pid 1, a pattern without
  # %{token}: a name another process wrote (a Fathom file) is never
  # replaced; the flusher takes the next index.
  def test_a_name_that_exists_takes_the_next_index_and_nothing_is_replaced
    pattern = "heap-%{pid}-%{time}-%{index}.pb.gz"
    @flusher = Fathom::PeriodicFlusher.new(FakeProfiler.new, dir: @dir, interval: 60, pattern: pattern)
    taken = Fathom::PeriodicFlusher.next_index
    theirs = "\x1f\x8b\x08\x10\x00\x00\x00\x00\x00\x03fathom\x00other container".b
    now = Time.now.utc
    [now, now + 1].each do |t|
      (taken + 1..taken + 3).each do |i|
        File.binwrite(File.join(@dir, format(pattern, pid: Process.pid, time: t.strftime("%Y%m%dT%H%M%SZ"), index: i)), theirs)
      end
    end
    path = @flusher.flush_now
    @flusher = nil
    assert_equal "profile of #{Process.pid}", File.binread(path)
    assert_operator path[/-(\d+)\.pb\.gz\z/, 1].to_i, :>, taken + 3
    assert_equal 6, Dir.children(@dir).count { |n| File.binread(File.join(@dir, n)) == theirs }
  end

  # File names come from the profiler's kind and format, in one place
  # (Files::OutputPaths.periodic_pattern): a CPU or wall profiler's files used to
  # be named heap-....pb.gz, since the name was picked from the profiler's
  # class and only GcProfiler and RetentionProfiler were known.
  def test_default_names_follow_each_profilers_kind_and_format
    require_native!
    tail = "-%{pid}-%{token}-%{time}-%{index}"
    {
      Fathom::HeapProfiler.new => "heap#{tail}.pb.gz",
      Fathom::GcProfiler.new => "gc#{tail}.pb.gz",
      Fathom::GcProfiler.new(format: :firefox) => "gc#{tail}.json.gz",
      Fathom::CpuProfiler.new => "cpu#{tail}.pb.gz",
      Fathom::CpuProfiler.new(format: :firefox) => "cpu#{tail}.json.gz",
      Fathom::CpuProfiler.new(mode: :wall) => "wall#{tail}.pb.gz",
      Fathom::CpuProfiler.new(mode: :wall, format: :firefox) => "wall#{tail}.json.gz",
      Fathom::RetentionProfiler.new => "retention#{tail}.pb.gz",
      FakeProfiler.new => Fathom::PeriodicFlusher::DEFAULT_PATTERN, # no #kind: named as heap
    }.each do |profiler, pattern|
      assert_equal pattern, Fathom::PeriodicFlusher.new(profiler, dir: @dir).pattern, profiler.inspect
    end
  end

  def test_cpu_and_wall_files_are_named_for_their_kind
    require_native!
    %i[cpu wall].each do |mode|
      profiler = Fathom::CpuProfiler.new(mode: mode, interval: "1ms").start
      flusher = Fathom::PeriodicFlusher.new(profiler, dir: @dir, interval: 3600).start
      Array.new(10_000) { |i| i.to_s * 3 } # something to sample
      path = flusher.stop
      profiler.stop
      assert_match(/\A#{mode}-#{Process.pid}-\h{8}-\d{8}T\d{6}Z-\d+\.pb\.gz\z/, File.basename(path))
      assert_equal :cpu, Fathom::Profile.load(path).kind
    end
  end

  # AlwaysOn names its files the same way (it used to build its own pattern).
  def test_always_on_names_its_files_like_the_flusher
    require_native!
    always_on = Fathom::AlwaysOn.new(modes: %i[heap gc], dir: @dir, format: :firefox)
    assert_equal "heap-%{pid}-%{token}-%{time}-%{index}.pb.gz", always_on.flushers[:heap].pattern
    assert_equal "gc-%{pid}-%{token}-%{time}-%{index}.json.gz", always_on.flushers[:gc].pattern
  end
end
