# frozen_string_literal: true

require_relative "options"
require_relative "fork_hooks"
require_relative "notice"

module Fathom
  # Flushes a profiler every `interval` seconds from a background Ruby thread
  # and writes each profile atomically into `dir`, for always-on profiling:
  #
  #   profiler = Fathom::HeapProfiler.new.start
  #   flusher = Fathom::PeriodicFlusher.new(profiler, dir: "/var/tmp/profiles", interval: 60).start
  #   ...
  #   flusher.stop   # writes one last profile
  #   profiler.stop
  #
  # The flusher does not start or stop the profiler: that stays the caller's.
  # File names come from `pattern`: %{pid}, %{time} (UTC, 20261123T101500Z)
  # and %{index} (1, 2, ... counting files written by this process).
  #
  # After fork the child gets its own flusher thread (threads do not survive
  # fork) and writes its own files: its pid, its own index sequence.
  class PeriodicFlusher
    DEFAULT_PATTERN = "heap-%{pid}-%{time}-%{index}.pb.gz"
    MIN_INTERVAL_NS = 1_000_000 # 1ms: anything faster is a typo, not a flush rate

    # %{index} counts per process, not per flusher, so that two flushers
    # sharing a directory and pattern never pick the same name.
    @index_lock = Mutex.new
    @index_pid = nil
    @index = 0

    def self.next_index
      @index_lock.synchronize do
        # A forked child inherits the parent's count; start over there.
        if @index_pid != Process.pid
          @index_pid = Process.pid
          @index = 0
        end
        @index += 1
      end
    end

    def self.reset_index_after_fork
      @index_lock = Mutex.new
    end

    attr_reader :dir, :interval, :pattern, :last_path, :files_written

    def initialize(profiler, dir:, interval: 30, pattern: DEFAULT_PATTERN, gc: false)
      unless profiler.respond_to?(:flush)
        raise TypeError, "fathom: profiler must be a Fathom profiler (responding to #flush), got #{profiler.inspect}"
      end

      @profiler = profiler
      @dir = File.expand_path(Options.path("dir", dir))
      @interval = Options.duration("interval", interval, min_ns: MIN_INTERVAL_NS)
      @pattern = validate_pattern(pattern)
      @gc = Options.boolean("gc", gc)
      @lock = Mutex.new
      @wakeup = ConditionVariable.new
      @thread = nil
      @stopping = false
      @files_written = 0
      @last_path = nil
    end

    def running?
      @lock.synchronize { !@thread.nil? }
    end

    def start
      @lock.synchronize do
        raise Fathom::Error, "fathom: this PeriodicFlusher is already running" if @thread

        @stopping = false
        @thread = spawn_thread
      end
      ForkHooks.register(self)
      self
    end

    # Stops the thread and writes a final profile. Returns its path (nil if
    # the flusher was not running).
    def stop
      thread = @lock.synchronize do
        t = @thread
        @thread = nil
        @stopping = true
        @wakeup.broadcast
        t
      end
      return nil unless thread

      ForkHooks.unregister(self)
      thread.join
      flush_now
    end

    # Flushes and writes one file now; returns its path.
    def flush_now
      profile = @profiler.flush(gc: @gc)
      path = File.join(@dir, file_name)
      profile.write(path)
      @lock.synchronize do
        @files_written += 1
        @last_path = path
      end
      path
    end

    # Called by ForkHooks in the child: the parent's thread is gone and the
    # locks may be held by threads that no longer exist.
    def after_fork_child
      @lock = Mutex.new
      @wakeup = ConditionVariable.new
      @files_written = 0
      @last_path = nil
      self.class.reset_index_after_fork
      return unless @thread

      @stopping = false
      @thread = spawn_thread
    end

    private

    def file_name
      format(@pattern, pid: Process.pid, time: Time.now.utc.strftime("%Y%m%dT%H%M%SZ"), index: self.class.next_index)
    end

    def validate_pattern(pattern)
      raise TypeError, "fathom: pattern must be a String, got #{pattern.inspect}" unless pattern.is_a?(String)

      begin
        sample = format(pattern, pid: 1, time: "t", index: 1)
      rescue KeyError, ArgumentError => e
        raise ArgumentError, "fathom: pattern #{pattern.inspect} is invalid (#{e.message}); " \
                             "use %{pid}, %{time} and %{index}"
      end
      if sample.empty? || sample.include?("/") || sample.include?(File::SEPARATOR)
        raise ArgumentError, "fathom: pattern must be a file name (no directories), got #{pattern.inspect}"
      end

      pattern
    end

    def spawn_thread
      Thread.new do
        Thread.current.name = "fathom-flusher"
        while wait_for_next_tick
          begin
            flush_now
          rescue StandardError => e
            # A full disk or a bad directory must not kill always-on profiling.
            Fathom.notice { "fathom: periodic flush to #{@dir} failed: #{e.class}: #{e.message}" }
          end
        end
      end
    end

    # Sleeps one interval; false when asked to stop meanwhile.
    def wait_for_next_tick
      deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + @interval
      @lock.synchronize do
        until @stopping
          remaining = deadline - Process.clock_gettime(Process::CLOCK_MONOTONIC)
          return true if remaining <= 0

          @wakeup.wait(@lock, remaining)
        end
        false
      end
    end
  end
end
