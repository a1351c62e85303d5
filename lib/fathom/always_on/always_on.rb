# frozen_string_literal: true

require_relative "../modes"
require_relative "../options"
require_relative "../periodic_flusher"
require_relative "../process_comments"
require_relative "../files/rotation"
require_relative "sinks"
require_relative "../process/exec_hooks"
require_relative "../leaks/notes"

module Fathom
  # Continuous profiling of the whole process: a profiler per mode, each
  # flushed every `every` by a PeriodicFlusher into `dir` (files rotated by
  # Rotation) and/or handed to `sinks` (Sinks: a push client), carrying
  # pid, hostname, Ruby version and time window (ProcessComments). What
  # fathom/setup and the Railtie start from FATHOM_*.
  #
  #   always_on = Fathom::AlwaysOn.new(modes: %i[cpu heap gc], dir: "/var/tmp/fathom", every: 60,
  #                                    keep_files: 50, keep_mb: 100).start
  #   always_on.profilers[:heap]   # what Fathom::Rack's heap endpoint reads
  #   always_on.stop               # writes the last file of each mode
  #
  #   Fathom::AlwaysOn.new(modes: %i[cpu heap], sinks: [client]).start   # no file at all
  #
  # cpu and wall: one of them (Modes.parse refuses both: the CPU sampler is
  # one native collector per process, with one clock).
  class AlwaysOn
    MODES = %i[heap gc cpu wall].freeze
    WHY_NOT = { retention: "a retention snapshot walks the whole heap (in a forked child): too heavy to repeat on a schedule" }.freeze
    KEEP_MB_RANGE = Files::Rotation::MB_RANGE

    # What a PeriodicFlusher flushes: the profiler's profile with the
    # comments added (the flusher makes room for it through the Rotation).
    class Source
      def initialize(profiler)
        @profiler = profiler
      end

      # A heap window also carries the process's memory and the leak
      # holders found (Leaks::Notes), for `fathom leaks`.
      def flush(gc: false)
        extra = @profiler.kind == :heap ? Leaks::Notes.lines : nil
        @profiler.flush(gc: gc, stamp: ProcessComments.stamp(extra: extra))
      end

      # What the files are named for (PeriodicFlusher.default_pattern).
      def kind = @profiler.kind
      def format = @profiler.format
    end

    @running = []
    @lock = Mutex.new

    class << self
      # The instances started in this process and not stopped (what the
      # exec hook flushes).
      def running
        @lock.synchronize { @running.dup }
      rescue ThreadError # the lock of a thread that did not survive fork
        @lock = Mutex.new
        @running.dup
      end

      def register(always_on)
        @lock.synchronize { @running << always_on unless @running.any? { |a| a.equal?(always_on) } }
      end

      def unregister(always_on)
        @lock.synchronize { @running.reject! { |a| a.equal?(always_on) } }
      end
    end

    attr_reader :profilers, :flushers, :dir, :rotation, :sinks

    # options: the profilers' own (Modes::DEFAULTS: interval:, gc_source:...).
    # dir: where the files go; nil (with sinks) writes none. sinks: see Sinks.
    def initialize(modes:, dir: nil, every: 60, keep_files: 50, keep_mb: 100, sinks: nil, **options)
      @modes = Modes.parse(modes, "modes")
      bad = @modes - MODES
      raise ArgumentError, "fathom: #{bad.join(", ")} cannot run always-on (#{bad.map { |m| WHY_NOT[m] || "unknown mode" }.uniq.join("; ")}); modes: #{MODES.join(", ")}" unless bad.empty?

      @sinks = Sinks.new(sinks)
      raise ArgumentError, "fathom: dir must name a directory for the profiles, or sinks: must be given" if NilClass === dir && @sinks.empty?

      @dir = NilClass === dir ? nil : File.expand_path(Options.path("dir", dir))
      @every = every
      keep_files = Options.integer("keep_files", keep_files, Files::Rotation::FILES_RANGE)
      keep_mb = Options.integer("keep_mb", keep_mb, KEEP_MB_RANGE)
      @rotation = @dir && Files::Rotation.new(@dir, keep_files: keep_files, keep_bytes: keep_mb << 20)
      known = @modes.flat_map { |m| Modes::DEFAULTS.fetch(m).keys }
      Options.check_unknown!(options, known, "Fathom::AlwaysOn.new")
      @profilers = @modes.to_h { |m| [m, Modes.new_profiler(m, **options.slice(*Modes::DEFAULTS.fetch(m).keys))] }
      @flushers = @profilers.to_h do |mode, profiler|
        deliver = @sinks.empty? ? nil : @sinks.for_mode(mode)
        [mode, PeriodicFlusher.new(Source.new(profiler), dir: @dir, interval: every, rotation: @rotation, deliver: deliver)]
      end
    end

    # Errors raised by each sink so far ({sink => count}).
    def sink_errors = @sinks.errors

    def start
      # Before the profilers and flushers: ForkHooks runs hooks in
      # registration order, so in a forked child the sinks are reset
      # before any flusher of the child can deliver to them.
      @sinks.start
      @profilers.each_value(&:start)
      @flushers.each_value(&:start)
      self.class.register(self)
      ExecHooks.install
      self
    rescue StandardError
      stop
      raise
    end

    # Whether `mode` runs here, so that an endpoint can take a #window of it.
    def running?(mode)
      profiler = @profilers[mode]
      !profiler.nil? && profiler.running?
    end

    # The profile of `mode` while the block runs (a request, or an endpoint's
    # ?seconds=N), taken from the running profiler instead of refusing
    # because it holds Ruby's hooks; always-on's own files lose nothing
    # (PeriodicFlusher#window). Annotated (ProcessComments) like its files.
    # run: see PeriodicFlusher#window. The window goes to the sinks too.
    def window(mode, gc: false, run: nil, &block)
      flusher = @flushers.fetch(mode) { raise ArgumentError, "fathom: #{mode} is not running always-on" }
      flusher.window(gc: gc, run: run, &block)
    end

    # Before exec (ExecHooks): each mode writes its file now, as at exit
    # (no exit handler runs before exec), and keeps running: if exec fails
    # the next file starts where this one ended.
    def before_exec
      @flushers.each_value do |f|
        f.flush_now if f.running?
      rescue StandardError => e
        Fathom.notice { "fathom: the always-on profile before exec could not be written: #{e.class}: #{e.message}" }
      end
      @sinks.before_exec
    end

    # Stops the flushers (each writes and delivers its last profile), the
    # profilers, then the sinks, which get at most `timeout` seconds in all
    # to send what they hold (Sinks#stop).
    def stop(timeout: Sinks::STOP_TIMEOUT)
      self.class.unregister(self)
      @flushers.each_value do |f|
        f.stop
      rescue StandardError => e
        Fathom.notice { "fathom: the last always-on profile could not be written: #{e.class}: #{e.message}" }
      end
      @profilers.each_value(&:stop)
      @sinks.stop(timeout: timeout)
      self
    end
  end
end
