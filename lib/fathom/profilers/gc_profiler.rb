# frozen_string_literal: true

require_relative "../options"
require_relative "../modes"
require_relative "../native"
require_relative "../profile"
require_relative "../process/internal_thread"
require_relative "collector_lifecycle"

module Fathom
  # GC profiler: the Ruby face of Fathom::Native::GcCollector. Records the
  # wall and CPU time of every GC step (coalesced into periods) with the GC's
  # type, reason and cause, and writes it as pprof (GC as its own "GC"
  # thread on a "Garbage Collection" frame) or as a Firefox Profiler timeline.
  #
  #   profiler = Fathom::GcProfiler.new(format: :firefox).start
  #   ...
  #   profiler.stop
  #   profiler.flush.write("gc.json.gz")
  class GcProfiler
    include CollectorLifecycle

    # coalesce: GC steps are summed and become one sample at most this often
    # (or when a major GC finishes, with flush_on_major). 0 records every
    # step on its own — only for measuring what coalescing saves (hooks only).
    # With gc_source: :counters it is how often the counters are read.
    #
    # gc_source: where the data comes from.
    #   :hooks     GC event hooks: every GC step, pause percentiles. On Ruby
    #              < 3.3 any GC hook sends every allocation through Ruby's
    #              slow path (~1.35x on an allocation loop).
    #   :counters  no hook: Ruby's GC counters (GC.count, GC.stat :time,
    #              :minor_gc_count, :major_gc_count, GC.latest_gc_info) read
    #              every `coalesce` by a sleeping Ruby thread. Exact counts and
    #              total time, which is process CPU time (GC.stat(:time));
    #              a period per read, labelled with the latest GC's
    #              type/reason/cause; no wall time, steps or pauses (the
    #              files leave them out: pprof sample types cpu and gcs).
    #   :auto      :counters on Ruby < 3.3, :hooks on 3.3+ (where GC hooks no
    #              longer force the slow path); :hooks with coalesce: 0.
    DEFAULTS = Modes::DEFAULTS.fetch(:gc)
    FORMATS = Modes::FORMATS.fetch(:gc)
    COALESCE_MAX_NS = Options::COALESCE_NS.end
    # The Ruby whose GC hooks stop forcing the slow allocation path
    # (ruby/ruby#8378, "Only force alloc slowpath for NEWOBJ hook").
    HOOKS_CHEAP_SINCE = Gem::Version.new("3.3")

    attr_reader :coalesce_ns, :flush_on_major, :format, :gc_source

    def self.auto_source(coalesce_ns)
      return :hooks if coalesce_ns == 0 # one period per step: only hooks see steps

      Gem::Version.new(RUBY_VERSION) >= HOOKS_CHEAP_SINCE ? :hooks : :counters
    end

    def initialize(**opts)
      Options.check_unknown!(opts, DEFAULTS.keys, "Fathom::GcProfiler.new")
      opts = DEFAULTS.merge(opts)
      @coalesce_ns = coalesce_option(opts[:coalesce])
      @flush_on_major = Options.boolean("flush_on_major", opts[:flush_on_major])
      @format = Options.one_of("format", opts[:format], FORMATS)
      @gc_source = Options.one_of("gc_source", opts[:gc_source], Modes::GC_SOURCES)
      @gc_source = self.class.auto_source(@coalesce_ns) if @gc_source == :auto
      if @gc_source == :counters && @coalesce_ns == 0
        raise ArgumentError, "fathom: coalesce: 0 (one period per GC step) needs gc_source: :hooks"
      end

      NativeLoader.require!
      @collector = Native::GcCollector.new(@coalesce_ns, @flush_on_major, @gc_source)
      @lock = Mutex.new
      @poller = nil
    end

    def start
      super
      start_poller
      self
    end

    def stop
      stop_poller
      super
    end

    # Called by ForkHooks in a forked child: threads do not survive fork.
    def after_fork_child
      super
      @poller = nil
      start_poller
    end

    # What was recorded since start (or the previous flush), encoded in
    # `format`; the next flush starts a new window (the profiler keeps
    # running), so a PeriodicFlusher writes one window per file. gzip: applies to :firefox (pprof is always gzipped);
    # by default a Firefox profile is gzipped, which profiler.firefox.com reads.
    # gc: is accepted for symmetry with HeapProfiler#flush and ignored
    # (forcing a GC here would only add a GC to the profile).
    def flush(gc: false, gzip: true)
      flush_encoded(:gc, gc, gzip)
    end

    def inspect
      "#<#{self.class} format=#{@format} coalesce=#{Options.format_ns(@coalesce_ns)} gc_source=#{@gc_source} " \
        "#{running? ? "running" : "stopped"}>"
    end

    private

    # The counters source reads Ruby's GC counters from a Ruby thread that
    # sleeps `coalesce` between reads (sleep releases the GVL). Why a Ruby
    # thread and not SampleTimer's native timer: the reads need the GVL and
    # a safe point, which on Ruby 3.1 a native thread can only get by
    # signalling (SIGPROF, owned by the heap profiler's timer); a sleeping
    # Ruby thread gets both for the price of one GVL hand-off per read and
    # nothing between reads. When the program keeps the GVL busy, Ruby hands
    # it over at its 100 ms time slice, so reads (and periods) are then
    # 100 ms apart; start/stop/flush read too, so counts stay exact.
    def start_poller
      return unless @gc_source == :counters && running?
      return if @poller&.alive?

      interval = @coalesce_ns / 1e9
      collector = @collector
      lock = @lock
      @poller = InternalThread.start("fathom-gc-poll") do
        loop do
          sleep(interval)
          lock.synchronize { collector.poll }
        end
      end
    end

    def stop_poller
      poller = @poller
      @poller = nil
      return unless poller

      poller.kill
      poller.join unless poller == Thread.current
    end

    def coalesce_option(value)
      return 0 if value == 0 || value == false

      Options.duration_ns("coalesce", value, min_ns: Options::COALESCE_NS.begin, max_ns: Options::COALESCE_NS.end)
    end
  end
end
