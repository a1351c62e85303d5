# frozen_string_literal: true

require_relative "options"
require_relative "native"
require_relative "profile"
require_relative "fork_hooks"

module Fathom
  # Heap (allocation + in-use) profiler: the Ruby face of
  # Fathom::Native::MemoryCollector.
  #
  #   profiler = Fathom::MemoryProfiler.new(interval: "10ms")
  #   profiler.start
  #   ...
  #   profile = profiler.flush(gc: true)   # => Fathom::Profile
  #   profiler.stop
  #
  # exact: false (default) samples one allocation per timer tick (`interval`),
  # with hooks off between samples; exact: true records every allocation
  # (slow, for tests and small scripts).
  class MemoryProfiler
    # 10 ms: each tick costs ~60us on the machines measured (a signal and a
    # postponed job ~30us, installing + removing the hook ~30us), so 100
    # samples/s stays within ~1% on an allocation-heavy loop while 1 ms
    # costs 5-9% (IMPLEMENTATION.md, "Cost").
    DEFAULTS = { exact: false, interval: 0.01, max_depth: 128 }.freeze

    attr_reader :exact, :interval_ns, :max_depth

    def initialize(**opts)
      Options.check_unknown!(opts, DEFAULTS.keys, "Fathom::MemoryProfiler.new")
      opts = DEFAULTS.merge(opts)
      @exact = Options.boolean("exact", opts[:exact])
      @interval_ns = Options.duration_ns("interval", opts[:interval],
                                         min_ns: Options::SAMPLING_INTERVAL_NS.begin,
                                         max_ns: Options::SAMPLING_INTERVAL_NS.end)
      @max_depth = Options.integer("max_depth", opts[:max_depth], Options::MAX_DEPTH_RANGE)
      NativeLoader.require!
      @collector = Native::MemoryCollector.new(@exact, @interval_ns, @max_depth)
      @lock = Mutex.new
    end

    # Sampling interval in seconds.
    def interval
      @interval_ns / 1e9
    end

    # Raises Fathom::Error if another profiler is already running in this process.
    def start
      @lock.synchronize { @collector.start }
      ForkHooks.register(self)
      self
    end

    def stop
      @lock.synchronize { @collector.stop }
      ForkHooks.unregister(self)
      self
    end

    def running?
      @collector.running?
    end

    # Encodes what has been collected so far (the profiler keeps running).
    # gc: true runs a full GC first so that in-use numbers only count objects
    # that are really reachable.
    def flush(gc: false)
      gc = Options.boolean("gc", gc)
      # The lock keeps a flusher thread's flush from racing start/stop.
      bytes, stats = @lock.synchronize { @collector.flush(gc) }
      Profile.new(bytes, stats)
    end

    def stats
      @collector.stats
    end

    # Runs the block with the profiler started, stops it (also when the block
    # raises), then returns the flushed Fathom::Profile.
    def profile(gc: true)
      raise ArgumentError, "fathom: MemoryProfiler#profile needs a block" unless block_given?

      start
      begin
        yield self
      ensure
        stop
      end
      flush(gc: gc)
    end

    # Called by ForkHooks in a forked child (only while running).
    def after_fork_child
      # The lock may have been held by a thread that did not survive the fork.
      @lock = Mutex.new
      @collector.after_fork_child
    end

    def inspect
      "#<#{self.class} exact=#{@exact} interval=#{Options.format_ns(@interval_ns)} " \
        "max_depth=#{@max_depth} #{running? ? "running" : "stopped"}>"
    end
  end
end
