# frozen_string_literal: true

require_relative "options"
require_relative "modes"
require_relative "native"
require_relative "profile"
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
    # step on its own — only for measuring what coalescing saves.
    DEFAULTS = Modes::DEFAULTS.fetch(:gc)
    FORMATS = Modes::FORMATS.fetch(:gc)
    COALESCE_MAX_NS = Options::COALESCE_NS.end

    attr_reader :coalesce_ns, :flush_on_major, :format

    def initialize(**opts)
      Options.check_unknown!(opts, DEFAULTS.keys, "Fathom::GcProfiler.new")
      opts = DEFAULTS.merge(opts)
      @coalesce_ns = coalesce_option(opts[:coalesce])
      @flush_on_major = Options.boolean("flush_on_major", opts[:flush_on_major])
      @format = Options.one_of("format", opts[:format], FORMATS)
      NativeLoader.require!
      @collector = Native::GcCollector.new(@coalesce_ns, @flush_on_major)
      @lock = Mutex.new
    end

    # What was recorded since start (or the previous flush), encoded in
    # `format`; the next flush starts a new window (the profiler keeps
    # running), so a PeriodicFlusher writes one window per file. gzip: applies to :firefox (pprof is always gzipped);
    # by default a Firefox profile is gzipped, which profiler.firefox.com reads.
    # gc: is accepted for symmetry with HeapProfiler#flush and ignored
    # (forcing a GC here would only add a GC to the profile).
    def flush(gc: false, gzip: true)
      Options.boolean("gc", gc)
      gzip = Options.boolean("gzip", gzip)
      bytes = @lock.synchronize { @collector.encode(@format, gzip) }
      Profile.new(bytes, stats.merge(ractors: RactorCheck.stat(self)), kind: :gc, format: @format)
    end

    def inspect
      "#<#{self.class} format=#{@format} coalesce=#{Options.format_ns(@coalesce_ns)} " \
        "#{running? ? "running" : "stopped"}>"
    end

    private

    def coalesce_option(value)
      return 0 if value == 0 || value == false

      Options.duration_ns("coalesce", value, min_ns: Options::COALESCE_NS.begin, max_ns: Options::COALESCE_NS.end)
    end
  end
end
