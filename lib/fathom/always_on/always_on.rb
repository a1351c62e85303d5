# frozen_string_literal: true

require_relative "../modes"
require_relative "../options"
require_relative "periodic_flusher"
require_relative "process_comments"
require_relative "rotation"
require_relative "../process/exec_hooks"

module Fathom
  # Continuous profiling of the whole process: a profiler per mode, each
  # flushed into `dir` every `every` by a PeriodicFlusher, files rotated
  # (Rotation) and carrying pid, hostname, Ruby version and time window
  # (ProcessComments), so a directory can be shipped to Pyroscope or Parca
  # as it is. What fathom/setup and the Railtie start from FATHOM_*.
  #
  #   always_on = Fathom::AlwaysOn.new(modes: %i[heap gc], dir: "/var/tmp/fathom", every: 60,
  #                                    keep_files: 50, keep_mb: 100).start
  #   always_on.profilers[:heap]   # what Fathom::Rack's heap endpoint reads
  #   always_on.stop               # writes the last file of each mode
  class AlwaysOn
    MODES = %i[heap gc].freeze
    WHY_NOT = { retention: "a retention snapshot stops the world",
                cpu: "CPU and wall profiling cannot run always-on yet: use the profile endpoint or ?fathom=cpu",
                wall: "CPU and wall profiling cannot run always-on yet: use the profile endpoint or ?fathom=cpu" }.freeze
    KEEP_MB_RANGE = Rotation::MB_RANGE

    # What a PeriodicFlusher flushes: the profiler's profile with the
    # comments added (the flusher makes room for it through the Rotation).
    class Source
      def initialize(profiler)
        @profiler = profiler
      end

      def flush(gc: false)
        @profiler.flush(gc: gc, stamp: ProcessComments.stamp)
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

    attr_reader :profilers, :flushers, :dir, :rotation

    # options: the profilers' own (Modes::DEFAULTS: interval:, gc_source:...).
    def initialize(modes:, dir:, every: 60, keep_files: 50, keep_mb: 100, **options)
      @modes = Modes.parse(modes, "modes")
      bad = @modes - MODES
      raise ArgumentError, "fathom: #{bad.join(", ")} cannot run always-on (#{bad.map { |m| WHY_NOT[m] || "unknown mode" }.uniq.join("; ")}); modes: #{MODES.join(", ")}" unless bad.empty?

      @dir = File.expand_path(Options.path("dir", dir))
      @every = every
      keep_files = Options.integer("keep_files", keep_files, Rotation::FILES_RANGE)
      keep_mb = Options.integer("keep_mb", keep_mb, KEEP_MB_RANGE)
      @rotation = Rotation.new(@dir, keep_files: keep_files, keep_bytes: keep_mb << 20)
      known = @modes.flat_map { |m| Modes::DEFAULTS.fetch(m).keys }
      Options.check_unknown!(options, known, "Fathom::AlwaysOn.new")
      @profilers = @modes.to_h { |m| [m, Modes.profiler_class(m).new(**options.slice(*Modes::DEFAULTS.fetch(m).keys))] }
      @flushers = @profilers.to_h do |mode, profiler|
        [mode, PeriodicFlusher.new(Source.new(profiler), dir: @dir, interval: every, rotation: @rotation)]
      end
    end

    def start
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
    def window(mode, gc: false, &block)
      flusher = @flushers.fetch(mode) { raise ArgumentError, "fathom: #{mode} is not running always-on" }
      flusher.window(gc: gc, &block)
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
    end

    # Stops the flushers (each writes its last file) and the profilers.
    def stop
      self.class.unregister(self)
      @flushers.each_value do |f|
        f.stop
      rescue StandardError => e
        Fathom.notice { "fathom: the last always-on profile could not be written: #{e.class}: #{e.message}" }
      end
      @profilers.each_value(&:stop)
      self
    end
  end
end
