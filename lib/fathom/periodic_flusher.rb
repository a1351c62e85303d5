# frozen_string_literal: true

require_relative "files/atomic_file"
require_relative "files/stdlib"
require_relative "periodic_flusher/flush_schedule"
require_relative "process/fork_hooks"
require_relative "notice"
require_relative "options"
require_relative "files/output_paths"
require_relative "process/own_threads"
require_relative "process/process_token"
require_relative "monotonic"

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
  # File names come from `pattern`: %{pid}, %{token} (8 random hex digits,
  # new in each process image and forked child: ProcessToken), %{time}
  # (UTC, 20261123T101500Z) and %{index} (1, 2, ... counting files written
  # by this process); %% is a percent sign. The default names the profile's
  # kind and its format's extension: heap-%{pid}-%{token}-%{time}-%{index}.pb.gz,
  # gc-....json.gz for a GcProfiler writing Firefox JSON. With %{index} in
  # the pattern a file is never replaced: a name that exists already
  # (another process with the same pid and a user pattern without
  # %{token}) takes the next index. Without %{index}, a file Fathom wrote
  # is replaced (the pattern rotates in place).
  #
  # rotation: a Rotation for `dir`: each file is then created under its
  # lock, after making room for it (AlwaysOn passes one).
  #
  # deliver: something responding to #call(profile, from_ns, until_ns),
  # handed every profile flushed (the ticks', #flush_now's, #stop's last
  # one, a #window's) after it is written, with the CLOCK_REALTIME window
  # it covers (from the previous flush, or the start, to this one). Called
  # under the flush lock, so one flusher's profiles arrive in order: it
  # must return quickly (AlwaysOn's Sinks: push clients queue). With
  # deliver:, `dir` may be nil: then no file is written at all.
  #
  # interval: 1 ms to 24 h. The flusher keeps to a fixed rate, but it is a
  # Ruby thread and may start late when other threads keep the GVL; a tick
  # missed while a flush was still running is skipped (the next file covers
  # its window). #stats says how late it runs (FlushSchedule).
  #
  # A flush that fails (a full disk) is reported through Fathom.notice and
  # the next tick tries again. If the thread itself dies (killed, or an
  # error outside a flush), #running? turns false, #stats[:thread_error]
  # says why, and #stop still writes the final file.
  #
  # After fork the child gets its own flusher thread (threads do not survive
  # fork) and writes its own files: its pid, its own index sequence.
  class PeriodicFlusher
    DEFAULT_PATTERN = Files::OutputPaths.periodic_pattern(:heap, :pprof)
    # 1 ms: anything faster is a typo, not a flush rate. 24 h: longer is a
    # typo too (and waits that long overflow Ruby's sleep).
    INTERVAL_NS = (1_000_000..86_400_000_000_000).freeze
    MIN_INTERVAL_NS = INTERVAL_NS.begin
    PLACEHOLDERS = /%\{(?:pid|token|time|index)\}|%%/.freeze
    # Names tried when the one picked exists (%{index} patterns only).
    NAME_ATTEMPTS = 20
    # A name as long as a pattern can make it (a 10-digit pid, a 20-digit
    # index) must fit in a directory entry (255 bytes on every common file
    # system) with the temporary file's additions around it.
    NAME_MAX = 255
    TEMP_EXTRA = ".".bytesize + ".4294967295.".bytesize + 8 + Files::AtomicFile::TMP_SUFFIX.bytesize

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

    # "<kind>-%{pid}-%{token}-%{time}-%{index}<ext>" for what `profiler`
    # writes (Files::OutputPaths.periodic_pattern), from its #kind and #format; an
    # object that has neither (anything responding to #flush) is named as
    # a heap profile, DEFAULT_PATTERN.
    def self.default_pattern(profiler)
      kind = profiler.respond_to?(:kind) ? profiler.kind : :heap
      format = profiler.respond_to?(:format) ? profiler.format : :pprof
      Files::OutputPaths.periodic_pattern(kind, format)
    end

    attr_reader :dir, :interval, :pattern, :last_path, :files_written

    def initialize(profiler, dir:, interval: 30, pattern: nil, gc: false, rotation: nil, deliver: nil)
      unless Options.responds_to?(profiler, :flush)
        raise TypeError, "fathom: profiler must be a Fathom profiler (responding to #flush), got #{Options.describe(profiler)}"
      end
      unless deliver.nil? || deliver.respond_to?(:call)
        raise TypeError, "fathom: deliver must respond to #call(profile, from_ns, until_ns), got #{Options.describe(deliver)}"
      end

      @profiler = profiler
      @deliver = deliver
      # No directory: only deliver: gets the profiles (nothing is written).
      @dir = NilClass === dir && deliver ? nil : validate_dir(dir)
      @interval_ns = Options.duration_ns("interval", interval, min_ns: INTERVAL_NS.begin, max_ns: INTERVAL_NS.end)
      @interval = @interval_ns / 1e9
      @pattern = NilClass === pattern ? self.class.default_pattern(profiler) : validate_pattern(pattern)
      @gc = Options.boolean("gc", gc)
      unless rotation.nil? || rotation.respond_to?(:write_new)
        raise TypeError, "fathom: rotation must be a Fathom::Files::Rotation, got #{Options.describe(rotation)}"
      end

      @rotation = rotation
      @lock = Mutex.new
      @wakeup = ConditionVariable.new
      # Serializes flushes (the tick's, #flush_now's, a window's): two
      # flushes of one profiler must not run at once.
      @flush_lock = Mutex.new
      @held = 0
      @thread = nil
      @stopping = false
      @from_ns = realtime_ns
      reset_stats
    end

    # Whether the flusher thread is alive: false before start, after stop,
    # and if the thread died (see #stats[:thread_error]).
    def running?
      @lock.synchronize { !@thread.nil? && @thread.alive? }
    end

    def start
      @lock.synchronize do
        raise Fathom::Error, "fathom: this PeriodicFlusher is already running" if @thread&.alive?

        prepare_dir if @dir

        @stopping = false
        @from_ns = realtime_ns # the profiler's window is the caller's; this is when ours starts
        @thread_error = nil
        @thread = spawn_thread
      end
      ForkHooks.register(self)
      self
    end

    # Stops the thread and writes a final profile, also when the thread had
    # died. Returns its path (nil if the flusher was not started).
    def stop
      thread = @lock.synchronize do
        t = @thread
        note_killed
        @thread = nil
        @stopping = true
        @wakeup.broadcast
        t
      end
      return nil unless thread

      ForkHooks.unregister(self)
      join(thread)
      flush_now
    end

    # Flushes and writes one file now; returns its path.
    def flush_now
      flush_profile(gc: @gc).first
    end

    # A window of the running profile, for an endpoint (Fathom::Rack) that
    # would otherwise have to refuse because this profiler holds Ruby's
    # hooks: what came before is flushed to its own file first, the ticks
    # are held while the block runs (their data goes into the window), and
    # the window is written as the next file, so the always-on files keep
    # every event exactly once. Returns the window's profile.
    #
    # run: what runs the two flushes (each a block), when they must not run
    # on the caller's thread: the Rack endpoints pass one that runs them on
    # their profile thread (Endpoints#work), while the caller sleeps.
    def window(gc: @gc, run: nil)
      run ||= ->(&flush) { flush.call }
      begin
        run.call { flush_now }
      rescue StandardError => e # a full disk must not cost the window
        Fathom.notice { "fathom: flush to #{where} before a window failed: #{e.class}: #{e.message}" }
      end
      @lock.synchronize { @held += 1 }
      begin
        yield
      ensure
        @lock.synchronize { @held -= 1 }
      end
      run.call { flush_profile(gc: gc).last }
    end

    private def flush_profile(gc:)
      @flush_lock.synchronize do
        started = Monotonic.now_ns
        profile = @profiler.flush(gc: gc)
        from_ns = @from_ns
        @from_ns = until_ns = realtime_ns
        begin
          write_profile(profile, started)
        ensure
          # Written or not (a full disk), the sinks get the window: it is
          # gone from the profiler either way.
          @deliver&.call(profile, from_ns, until_ns)
        end
      end
    end

    private def write_profile(profile, started)
      path = @dir && write_file(profile.bytes)
      @lock.synchronize do
        @files_written += 1
        @last_path = path
        @schedule&.record_flush_ns(Monotonic.now_ns - started)
      end
      [path, profile]
    end

    # A name new by construction: one native write without the GVL in
    # between (Files::AtomicFile.write_new). With %{index}, nothing is replaced: a
    # name that exists takes the next index. Without it, a file Fathom wrote
    # is replaced (the pattern rotates in place).
    private def write_file(bytes)
      unique = @pattern.include?("%{index}")
      NAME_ATTEMPTS.times do
        path = File.join(@dir, file_name)
        written =
          if @rotation then @rotation.write_new(path, bytes, replace: !unique)
          else Files::AtomicFile.write_new(path, bytes, replace: !unique)
          end
        return written if written
      end
      raise Fathom::Error, "fathom: no free file name in #{@dir} after #{NAME_ATTEMPTS} tries (pattern #{@pattern})"
    end

    # How the flusher is doing: files written, failed flushes (errors,
    # last_error), the thread's fate (thread_error), and FlushSchedule's
    # lateness numbers (late_by_ns, max_late_by_ns, late_flushes,
    # skipped_ticks, flush_ns, max_flush_ns, interval_ns).
    def stats
      @lock.synchronize do
        note_killed
        base = @schedule ? @schedule.stats : FlushSchedule.new(@interval_ns, 0).stats
        base.merge(files_written: @files_written, errors: @errors, last_error: @last_error,
                   thread_error: @thread_error && describe(@thread_error))
      end
    end

    # Called by ForkHooks in the child: the parent's thread is gone and the
    # locks may be held by threads that no longer exist.
    def after_fork_child
      @lock = Mutex.new
      @wakeup = ConditionVariable.new
      @flush_lock = Mutex.new
      @held = 0
      # The child's windows start at the fork (a forked CPU collector starts
      # from an empty window; the parent delivers its own up to now).
      @from_ns = realtime_ns
      reset_stats
      self.class.reset_index_after_fork
      return unless @thread

      @stopping = false
      @thread = spawn_thread
    end

    private

    # A thread that ended while it was neither asked to stop nor failed was
    # killed (Thread#kill runs no rescue clause, nor anything if the thread
    # had not started yet). Called with @lock held.
    def note_killed
      @thread_error ||= "killed" if @thread && !@thread.alive? && !@stopping
    end

    def reset_stats
      @files_written = 0
      @last_path = nil
      @errors = 0
      @last_error = nil
      @thread_error = nil
      @schedule = nil
      @announced_lateness = false
    end

    # Where the profiles go, for messages.
    def where
      @dir || "its sinks"
    end

    def realtime_ns
      Process.clock_gettime(Process::CLOCK_REALTIME, :nanosecond)
    end

    def file_name
      format(@pattern, pid: Process.pid, token: ProcessToken.get, time: Time.now.utc.strftime("%Y%m%dT%H%M%SZ"),
                       index: self.class.next_index)
    end

    # An existing directory, or one that can be created (#start creates
    # it); ArgumentError naming `dir` otherwise.
    def validate_dir(dir)
      given = Options.path("dir", dir)
      raise ArgumentError, "fathom: dir must not contain a NUL byte, got #{Options.shown(given)}" if given.include?("\0")

      dir = File.expand_path(given)
      Files::AtomicFile.check_dir!(dir)
      dir
    rescue Fathom::Error, ArgumentError, EncodingError => e
      raise if e.message.start_with?("fathom: dir")

      raise ArgumentError, "fathom: dir #{Options.shown(given)} cannot be used: #{e.message.delete_prefix("fathom: ")}"
    end

    def validate_pattern(pattern)
      raise TypeError, "fathom: pattern must be a String, got #{Options.describe(pattern)}" unless String === pattern

      check_pattern(pattern)
      pattern
    rescue ArgumentError, EncodingError => e
      raise e if e.message.start_with?("fathom: pattern")

      raise ArgumentError, "fathom: pattern #{Options.shown(pattern)} is invalid (#{Options.clean(e.message)})"
    end

    def check_pattern(pattern)
      bad = lambda do |why|
        raise ArgumentError, "fathom: pattern #{why}, got #{Options.shown(pattern)} (a file name with %{pid}, %{token}, " \
                             "%{time}, %{index}; %% for a percent sign)"
      end
      bad.call("must not contain a NUL byte") if pattern.include?("\0")
      bad.call("has a % directive Fathom does not fill") if pattern.gsub(PLACEHOLDERS, "").include?("%")
      longest = format(pattern, pid: 4_294_967_295, token: "ffffffff", time: "20261123T101500Z", index: 10**20)
      bad.call("must be a file name (no directories, not . or ..)") if longest.include?("/") || %w[. ..].include?(longest)
      bad.call("must not be empty") if longest.empty?
      bad.call("must not end with #{Files::AtomicFile::TMP_SUFFIX} (Fathom's temporary files)") if longest.end_with?(Files::AtomicFile::TMP_SUFFIX)
      return if longest.bytesize + TEMP_EXTRA <= NAME_MAX

      bad.call("makes names too long (#{longest.bytesize} bytes; at most #{NAME_MAX - TEMP_EXTRA})")
    end

    def spawn_thread
      @schedule = FlushSchedule.new(@interval_ns, Monotonic.now_ns)
      thread = Thread.new { run }
      thread.name = "fathom-flusher" # here, not in the thread: named from the start
      OwnThreads.add(thread)
    end

    # The thread's body. Whatever escapes the loop ends the thread but is
    # kept and reported, never raised at the program (report_on_exception
    # off: Fathom prints its own message through Fathom.notice).
    def run
      Thread.current.report_on_exception = false
      flush_on_tick while wait_for_tick
    rescue Exception => e # rubocop:disable Lint/RescueException -- the thread must end quietly, whatever it was
      @lock.synchronize { @thread_error = e }
      Fathom.notice do
        "fathom: the periodic flusher's thread (#{where}) ended: #{describe(e)}; #stop still writes the last profile"
      end
    end

    # Creates the directory and removes temp files of dead writers
    # (Files::AtomicFile.write does both on each write; write_new leaves them to
    # the flusher's start). Done by the caller of #start, not by the
    # thread, which would wait for the GVL after each syscall. A directory
    # that cannot be created raises here, before any flush.
    def prepare_dir
      Files::Stdlib.mkdir_p(@dir)
      Files::AtomicFile.warn_if_shared(@dir)
      Files::AtomicFile.remove_stale_temps(@dir)
    rescue SystemCallError => e
      raise Fathom::Error, "fathom: PeriodicFlusher cannot create #{@dir}: #{e.message}"
    end

    # Waits for the next tick; false when asked to stop meanwhile.
    def wait_for_tick
      @lock.synchronize do
        until @stopping
          remaining = @schedule.remaining_ns(Monotonic.now_ns)
          return true if remaining <= 0

          @wakeup.wait(@lock, remaining / 1e9)
        end
        false
      end
    end

    def flush_on_tick
      late = @lock.synchronize do
        # A window is open (#window): its closing flush takes this tick's data.
        return if @held.positive?

        @schedule.begin_flush(Monotonic.now_ns)
      end
      announce_lateness(late)
      flush_now
    rescue StandardError => e
      # A full disk or a bad directory must not kill always-on profiling.
      @lock.synchronize do
        @errors += 1
        @last_error = describe(e)
      end
      Fathom.notice { "fathom: periodic flush to #{where} failed: #{e.class}: #{e.message}" }
    end

    # Says once when ticks start being skipped.
    def announce_lateness(late)
      return if @announced_lateness || !@lock.synchronize { @schedule.behind? }

      @announced_lateness = true
      Fathom.notice do
        "fathom: the periodic flusher (#{where}, every #{Options.format_ns(@interval_ns)}) is falling behind: " \
          "a flush started #{Options.format_ns(late)} after its tick; missed ticks are skipped and their " \
          "windows go into the next file (see PeriodicFlusher#stats)"
      end
    end

    def join(thread)
      thread.join
    rescue Exception => e # rubocop:disable Lint/RescueException
      raise if thread.alive? # not the thread's end: the caller was interrupted while waiting

      @lock.synchronize { @thread_error ||= e }
    end

    def describe(error)
      error.is_a?(Exception) ? "#{error.class}: #{error.message}" : error.to_s
    end
  end
end
