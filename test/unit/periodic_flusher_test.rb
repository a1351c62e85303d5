# frozen_string_literal: true

require "test_helper"

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

  NAME_RE = /\Aheap-(\d+)-(\d{8}T\d{6}Z)-(\d+)\.pb\.gz\z/.freeze

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
end
