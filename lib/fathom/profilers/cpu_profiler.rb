# frozen_string_literal: true

require_relative "collector_lifecycle" # options, modes, native, profile
require_relative "background_drain"

module Fathom
  # CPU and wall-time profiler: the Ruby face of Fathom::Native::CpuCollector.
  # Every Ruby thread is sampled, not only the one holding the GVL: each has
  # its own timer (on its CPU clock in :cpu mode, on the monotonic clock in
  # :wall mode) whose SIGPROF makes the thread record its own stack, its CPU
  # and wall time since its previous sample, and its state (running,
  # gvl-wait, blocked, gc). See docs/internals/cpu.md, "CPU and wall profiling".
  # #start raises Fathom::Error, saying why, while another CPU/wall profiler
  # runs, when another profiler owns SIGPROF, or under Ruby 3.3's M:N
  # threads (RUBY_MN_THREADS=1), whose shared native threads per-thread
  # timers cannot follow.
  #
  #   profiler = Fathom::CpuProfiler.new(mode: :wall, interval: "5ms").start
  #   ...
  #   profiler.stop
  #   profiler.flush.write("wall.pb.gz")
  class CpuProfiler
    include Profilers::CollectorLifecycle
    include Profilers::BackgroundDrain

    MODES = %i[cpu wall].freeze
    FORMATS = Modes::FORMATS.fetch(:cpu)
    # How often the drain thread moves samples out of the signal ring when
    # no postponed job did (Ruby < 3.3 with every thread asleep).
    DRAIN_INTERVAL = 0.05
    # Ruby 3.3+: the longest the drain thread sleeps. There the handler has
    # the drain job run from any thread once the ring is 1/8 full, so the
    # thread only matters when no thread runs Ruby code while others burn
    # CPU in C (CPU mode: Zlib without the GVL), and every wake-up of a
    # sleeping Ruby thread costs a round trip through 3.3's timer thread:
    # at 50 ms the drain thread and the timer thread took ~9 ms of CPU per
    # second of an allocation loop (0.9%; /proc/<tid>/schedstat, issue 29),
    # against 0.3 ms with no drain thread. So it sleeps for the time one
    # thread sampled every interval takes to fill a quarter of the ring,
    # between DRAIN_INTERVAL and this (docs/internals/cpu.md, "Signal safety").
    DRAIN_INTERVAL_ANY_THREAD_MAX = 0.5

    attr_reader :mode, :interval_ns, :max_depth, :format, :native

    # mode: :cpu (time on each thread's CPU clock) or :wall (elapsed time,
    # sleeping and blocked threads included). interval: mean time between
    # samples of one thread (jittered ±25%). format: :pprof, or :firefox (a
    # Firefox Profiler timeline: a track per thread, state markers; every
    # sample is kept until flush). native: each sample also holds its C
    # frames (libz's deflate under Zlib::Deflate.deflate), woven under the
    # Ruby frames that called them (docs/internals/native.md, "C frames"); pprof
    # only: the Firefox timeline carries the Ruby frames.
    def initialize(mode: :cpu, **opts)
      Options.check_unknown!(opts, Modes::DEFAULTS.fetch(:cpu).keys, "Fathom::CpuProfiler.new")
      opts = Modes::DEFAULTS.fetch(:cpu).merge(opts)
      @mode = Options.one_of("mode", mode, MODES)
      @interval_ns = Options.sampling_interval_ns("interval", opts[:interval])
      @max_depth = Options.integer("max_depth", opts[:max_depth], Options::MAX_DEPTH_RANGE)
      @format = Options.one_of("format", opts[:format], FORMATS)
      @native = Options.boolean("native", opts[:native])

      NativeLoader.require!
      @collector = Native::CpuCollector.new(mode: @mode, interval_ns: @interval_ns, max_depth: @max_depth,
                                            timeline: @format == :firefox, native: @native)
      @lock = Mutex.new
    end

    # :cpu or :wall, as the mode (its files are named for it; the Profile's
    # kind is :cpu for both, Modes.profile_kind).
    def kind = @mode

    # flush(gc: false, gzip: true): Profilers::CollectorLifecycle#flush, in `format`.
    # start/stop/after_fork_child: Profilers::CollectorLifecycle's, with the drain
    # thread (Profilers::BackgroundDrain); in a forked child the profiler goes on,
    # sampling the child's thread.

    def inspect
      "#<#{self.class} mode=#{@mode} interval=#{Options.format_ns(@interval_ns)} " \
        "#{running? ? "running" : "stopped"}>"
    end

    private

    # A sleeping Ruby thread drains the ring every DRAIN_INTERVAL
    # (Profilers::BackgroundDrain). The signal handler also asks for a postponed job
    # when the ring fills, but on Ruby < 3.3 only the GVL holder can
    # register one that runs soon, and when every thread sleeps nobody
    # does. The thread is not sampled (InternalThread).
    def background_work
      ["fathom-cpu-drain", drain_interval, :drain]
    end

    def drain_interval
      stats = @collector.stats
      return DRAIN_INTERVAL if stats[:drain_job_from_any_thread].to_i.zero?

      (stats[:ring_capacity] * @interval_ns / 4e9).clamp(DRAIN_INTERVAL, DRAIN_INTERVAL_ANY_THREAD_MAX)
    end
  end
end
