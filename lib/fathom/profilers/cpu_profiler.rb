# frozen_string_literal: true

require_relative "../options"
require_relative "../modes"
require_relative "../native"
require_relative "../profile"
require_relative "collector_lifecycle"
require_relative "../process/internal_thread"

module Fathom
  # CPU and wall-time profiler: the Ruby face of Fathom::Native::CpuCollector.
  # Every Ruby thread is sampled, not only the one holding the GVL: each has
  # its own timer (on its CPU clock in :cpu mode, on the monotonic clock in
  # :wall mode) whose SIGPROF makes the thread record its own stack, its CPU
  # and wall time since its previous sample, and its state (running,
  # gvl-wait, blocked, gc). See IMPLEMENTATION.md, "CPU and wall profiling".
  #
  #   profiler = Fathom::CpuProfiler.new(mode: :wall, interval: "5ms").start
  #   ...
  #   profiler.stop
  #   profiler.flush.write("wall.pb.gz")
  class CpuProfiler
    include CollectorLifecycle

    MODES = %i[cpu wall].freeze
    FORMATS = Modes::FORMATS.fetch(:cpu)
    # How often the drain thread moves samples out of the signal ring when
    # no postponed job did (Ruby < 3.3 with every thread asleep).
    DRAIN_INTERVAL = 0.05

    attr_reader :mode, :interval_ns, :max_depth, :format, :native

    # mode: :cpu (time on each thread's CPU clock) or :wall (elapsed time,
    # sleeping and blocked threads included). interval: mean time between
    # samples of one thread (jittered ±25%). format: :pprof, or :firefox (a
    # Firefox Profiler timeline: a track per thread, state markers; every
    # sample is kept until flush). native: each sample also holds its C
    # frames (libz's deflate under Zlib::Deflate.deflate), woven under the
    # Ruby frames that called them (IMPLEMENTATION.md, "C frames"); pprof
    # only: the Firefox timeline carries the Ruby frames.
    def initialize(mode: :cpu, **opts)
      Options.check_unknown!(opts, Modes::DEFAULTS.fetch(:cpu).keys, "Fathom::CpuProfiler.new")
      opts = Modes::DEFAULTS.fetch(:cpu).merge(opts)
      @mode = Options.one_of("mode", mode, MODES)
      @interval_ns = Options.duration_ns("interval", opts[:interval], min_ns: Options::SAMPLING_INTERVAL_NS.begin,
                                                                      max_ns: Options::SAMPLING_INTERVAL_NS.end)
      @max_depth = Options.integer("max_depth", opts[:max_depth], Options::MAX_DEPTH_RANGE)
      @format = Options.one_of("format", opts[:format], FORMATS)
      @native = Options.boolean("native", opts[:native])

      NativeLoader.require!
      @collector = Native::CpuCollector.new(@mode, @interval_ns, @max_depth, @format == :firefox, @native)
      @lock = Mutex.new
      @drainer = nil
    end

    def start
      super
      start_drainer
      self
    end

    # Sampling stops first: joining the drain thread lets other threads run
    # (up to a GVL time slice each) and they must not be sampled after the
    # caller said stop.
    def stop
      super
      stop_drainer
      self
    end

    # In a forked child the profiler goes on, sampling the child's thread.
    def after_fork_child
      super
      @drainer = nil
      start_drainer
    end

    # What was sampled since start (or the previous flush), in `format`
    # (pprof is always gzipped; gzip: applies to :firefox); the next flush
    # starts a new window. gc: is accepted for symmetry with
    # HeapProfiler#flush and ignored.
    def flush(gc: false, gzip: true)
      flush_encoded(:cpu, gc, gzip)
    end

    def inspect
      "#<#{self.class} mode=#{@mode} interval=#{Options.format_ns(@interval_ns)} " \
        "#{running? ? "running" : "stopped"}>"
    end

    private

    # A sleeping Ruby thread drains the ring every DRAIN_INTERVAL. The
    # signal handler also asks for a postponed job when the ring fills, but
    # on Ruby < 3.3 only the GVL holder can register one that runs soon,
    # and when every thread sleeps nobody does. The thread is not sampled
    # (InternalThread).
    def start_drainer
      return unless running?
      return if @drainer&.alive?

      collector = @collector
      lock = @lock
      @drainer = InternalThread.start("fathom-cpu-drain") do
        loop do
          sleep(DRAIN_INTERVAL)
          lock.synchronize { collector.drain }
        end
      end
    end

    def stop_drainer
      drainer = @drainer
      @drainer = nil
      return unless drainer

      drainer.kill
      drainer.join unless drainer == Thread.current
    end
  end
end
