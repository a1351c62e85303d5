# frozen_string_literal: true

require_relative "options"

module Fathom
  # The one place that says what Fathom can profile, with which options by
  # default and in which formats. Fathom.profile, the `fathom` CLI (which
  # does not load the native extension, so this file loads nothing native)
  # and the autorun that `fathom run` injects all read it.
  #
  #   heap       allocations and what of them is alive (HeapProfiler)
  #   gc         what garbage collection costs and when (GcProfiler)
  #   retention  why objects are alive: a snapshot at the end (RetentionProfiler)
  #   cpu        where CPU time goes, every thread (CpuProfiler, mode: :cpu)
  #   wall       where elapsed time goes, sleeping/blocked threads too (CpuProfiler, mode: :wall)
  module Modes
    ALL = %i[heap gc retention cpu wall].freeze
    # The modes CpuProfiler takes (one sampler per process: not together).
    CPU_MODES = %i[cpu wall].freeze
    DEFAULT = :heap

    # Each profiler's options and their defaults. Durations are seconds.
    DEFAULTS = {
      # 10 ms: each tick costs ~60us (a postponed job, installing and
      # removing the hook), so 100 samples/s stays within ~1% on an
      # allocation-heavy loop while 1 ms costs 5-9% (docs/internals/heap.md, "Cost").
      heap: { exact: false, interval: 0.01, max_depth: 128, liveness: :auto, census: true }.freeze,
      # gc_source :auto: Ruby's GC counters on Ruby < 3.3 (any GC hook forces
      # the slow allocation path there), the GC hooks on 3.3+ (GcProfiler).
      gc: { coalesce: 0.01, flush_on_major: true, format: :pprof, gc_source: :auto }.freeze,
      # string_contents: String hash keys by their bytes, not their shape
      # (Fathom.retention_snapshot): off, profiles hold no program data.
      retention: { max_depth: 64, string_contents: false }.freeze,
      # 10 ms: each sample costs a signal and a stack walk on the sampled
      # thread (a few microseconds), so 100 samples/s per thread stays well
      # within 1% (bench/cpu_overhead.rb). native: C frames (off: they cost
      # a native unwind per sample).
      cpu: { interval: 0.01, max_depth: 128, native: false, format: :pprof }.freeze,
      wall: { interval: 0.01, max_depth: 128, native: false, format: :pprof }.freeze,
    }.freeze

    # Output formats per mode: every mode writes pprof; the GC and CPU/wall
    # profiles can also be a Firefox Profiler timeline.
    FORMATS = { heap: %i[pprof], gc: %i[pprof firefox], retention: %i[pprof], cpu: %i[pprof firefox], wall: %i[pprof firefox] }.freeze
    # Where the GC profile's data comes from (GcProfiler's gc_source:).
    GC_SOURCES = %i[auto hooks counters].freeze
    ALL_FORMATS = FORMATS.values.flatten.uniq.freeze

    module_function

    # "heap,gc" or [:heap, "gc"] -> [:heap, :gc]; ArgumentError naming `what`
    # (the option or variable) for an unknown or empty list.
    def parse(list, what = "mode")
      names =
        case list
        when String then list.scrub.split(",").map(&:strip).reject(&:empty?)
        when Array then list
        else [list] # one_of names the option for anything that is not a mode
        end
      raise ArgumentError, "fathom: #{what} must name at least one of #{ALL.join(", ")}" if names.empty?

      modes = names.map { |m| Options.one_of(what, m, ALL) }.uniq
      if (CPU_MODES - modes).empty?
        raise ArgumentError, "fathom: #{what} cpu and wall cannot be profiled together (one sampler per process); pick one"
      end

      modes
    end

    # The order profiles are taken in at the end of a run. A retention
    # snapshot that explains the heap profile's top sites needs the heap
    # profiler's live records: an exact-mode flush after stop ends them, so
    # there retention goes first. A sampled flush keeps them (it recycles
    # only the dead), and goes first itself (heap_first): the snapshot
    # allocates, and a heap flush after more than a few allocations since
    # stop cannot calibrate its live bytes to the heap census
    # (docs/internals/heap.md, "Calibrating live bytes to a heap census").
    # Otherwise the modes keep their order.
    def finish_order(modes, heap_first: false)
      first = heap_first ? %i[heap retention] : %i[retention]
      modes.each_with_index.sort_by { |m, i| [first.index(m) || first.size, i] }.map(&:first)
    end

    # Raises ArgumentError if `format` does not apply to every one of `modes`
    # that has a choice (modes with only pprof ignore it, as documented).
    def check_format!(modes, format, what = "format")
      format = Options.one_of(what, format, ALL_FORMATS)
      return format if format == :pprof || modes.any? { |m| FORMATS.fetch(m).include?(format) }

      raise ArgumentError, "fathom: #{what} #{format} applies to the gc, cpu and wall modes only, not #{modes.join(", ")}"
    end

    # The profiler class of a mode (loaded on first use).
    def profiler_class(mode)
      case mode
      when :heap then HeapProfiler
      when :gc then GcProfiler
      when :retention then RetentionProfiler
      when :cpu, :wall then CpuProfiler
      else raise ArgumentError, "fathom: unknown mode #{mode.inspect}"
      end
    end

    # The Fathom::Profile#kind of a mode's profile: cpu and wall profiles
    # are both :cpu (their stats say which); the others are the mode.
    def profile_kind(mode)
      CPU_MODES.include?(mode) ? :cpu : mode
    end

    # A new profiler for `mode` with `opts` (those Modes::DEFAULTS lists for it).
    def new_profiler(mode, **opts)
      CPU_MODES.include?(mode) ? CpuProfiler.new(mode: mode, **opts) : profiler_class(mode).new(**opts)
    end

    # "10ms" for 0.01: how the CLI's help shows a default duration.
    def format_seconds(seconds)
      Options.format_ns((seconds * 1e9).round)
    end
  end
end
