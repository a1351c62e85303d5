# frozen_string_literal: true

require_relative "collector_lifecycle" # options, modes, native, profile
require_relative "background_drain"

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
    include Profilers::CollectorLifecycle
    include Profilers::BackgroundDrain

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
    end

    def kind = :gc

    # flush(gc: false, gzip: true): Profilers::CollectorLifecycle#flush, in `format`.
    # start/stop/after_fork_child: Profilers::CollectorLifecycle's, with the counters
    # poller (Profilers::BackgroundDrain) when gc_source is :counters.

    def inspect
      "#<#{self.class} format=#{@format} coalesce=#{Options.format_ns(@coalesce_ns)} gc_source=#{@gc_source} " \
        "#{running? ? "running" : "stopped"}>"
    end

    private

    # The counters source reads Ruby's GC counters from a Ruby thread that
    # sleeps `coalesce` between reads (Profilers::BackgroundDrain). Why a Ruby
    # thread and not HeapTick's native timer: the reads need the GVL and
    # a safe point, which on Ruby 3.1 a native thread can only get by
    # signalling (SIGPROF, owned by the heap profiler's timer); a sleeping
    # Ruby thread gets both for the price of one GVL hand-off per read and
    # nothing between reads. When the program keeps the GVL busy, Ruby hands
    # it over at its 100 ms time slice, so reads (and periods) are then
    # 100 ms apart; start/stop/flush read too, so counts stay exact.
    def background_work
      ["fathom-gc-poll", @coalesce_ns / 1e9, :poll] if @gc_source == :counters
    end

    def coalesce_option(value)
      return 0 if value == 0 || value == false

      Options.duration_ns("coalesce", value, min_ns: Options::COALESCE_NS.begin, max_ns: Options::COALESCE_NS.end)
    end
  end
end
