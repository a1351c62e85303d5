# frozen_string_literal: true

require_relative "collector_lifecycle" # options, modes, native, profile, ruby_guards

module Fathom
  # Heap (allocation + in-use) profiler: the Ruby face of
  # Fathom::Native::HeapCollector.
  #
  #   profiler = Fathom::HeapProfiler.new(interval: "10ms")
  #   profiler.start
  #   ...
  #   profile = profiler.flush(gc: true)   # => Fathom::Profile
  #   profiler.stop
  #
  # exact: false (default) samples one allocation per timer tick (`interval`),
  # with hooks off between samples; exact: true records every allocation
  # (slow, for tests and small scripts).
  #
  # liveness: how sampled mode finds a sample's object again at flush to
  # tell whether it is still alive. :auto picks by Ruby version (see
  # LIVENESS_BY_VERSION); :object_id and :weakmap force one (tests, and a
  # way out should one misbehave on some Ruby). Exact mode sees frees
  # directly and ignores it.
  #
  # census: true (default) calibrates sampled mode's live bytes at each
  # flush to a walk of Ruby's heap (exact bytes per type and size class of
  # the objects allocated since start); false skips the walk (its cost
  # grows with the heap: ~3 ms per 100k live objects) and reports the plain
  # sampled estimate. See docs/internals/heap.md, "Calibrating live bytes to a
  # heap census". Exact mode ignores it.
  class HeapProfiler
    include Profilers::CollectorLifecycle

    DEFAULTS = Modes::DEFAULTS.fetch(:heap)

    # object_id is free of side effects and its ids survive GC.compact up to
    # Ruby 3.2.2, whose WeakMap is broken under compaction (Ruby bug #19529).
    # From 3.2.3 on, WeakMap works and object_id changes the object's shape
    # (and _id2ref is deprecated in 4.0, where :object_id is refused:
    # RubyGuards.liveness!), so a WeakMap keyed by sequence numbers holds
    # the samples' objects, weakly.
    # Read through RubyVersion at each new, so that the guards' tests can
    # fake a Ruby (unit/ruby_guards_test.rb).
    def self.auto_liveness
      RubyVersion.at_least?("3.2.3") ? :weakmap : :object_id
    end
    LIVENESS_BY_VERSION = auto_liveness
    LIVENESS = %i[auto object_id weakmap].freeze
    # live_objects(limit:): the store indexes records with 32 bits, so no
    # limit above this can matter (and the native side takes a C long).
    LIVE_OBJECTS_LIMIT = (1..0xFFFF_FFFF).freeze

    attr_reader :exact, :interval_ns, :max_depth, :liveness, :census

    def initialize(**opts)
      Options.check_unknown!(opts, DEFAULTS.keys, "Fathom::HeapProfiler.new")
      opts = DEFAULTS.merge(opts)
      @exact = Options.boolean("exact", opts[:exact])
      @interval_ns = Options.sampling_interval_ns("interval", opts[:interval])
      @max_depth = Options.integer("max_depth", opts[:max_depth], Options::MAX_DEPTH_RANGE)
      @liveness = Options.one_of("liveness", opts[:liveness], LIVENESS)
      @liveness = self.class.auto_liveness if @liveness == :auto
      @liveness = RubyGuards.liveness!(@liveness)
      NativeLoader.require!
      @census = Options.boolean("census", opts[:census])
      @collector = Native::HeapCollector.new(exact: @exact, interval_ns: @interval_ns, max_depth: @max_depth,
                                             liveness: @liveness)
      @collector.census = @census
      @lock = Mutex.new
    end

    def kind = :heap
    def format = :pprof

    # Sampling interval in seconds.
    def interval
      @interval_ns / 1e9
    end

    # Before Ractor.new: stop, and (exact mode) drop the FREEOBJ hook that
    # stop leaves for the next flush — on Ruby 3.1.0-3.1.3 an installed GC
    # hook crashes Ruby once another Ractor allocates. The records' liveness
    # is then unknown: the profile's stats say liveness "lost".
    def stop_for_ractor
      super
      @lock.synchronize { @collector.release_liveness_hook }
    end

    # Encodes what has been collected so far (the profiler keeps running).
    # gc: true runs a full GC first so that in-use numbers only count objects
    # that are really reachable.
    #
    # stamp: who wrote it, written into the profile as comments
    # (Fathom::ProcessComments.stamp; always-on files and the endpoints).
    def flush(gc: false, stamp: nil)
      gc = Options.boolean("gc", gc)
      # The lock keeps a flusher thread's flush from racing start/stop.
      bytes, stats = @lock.synchronize { @collector.flush(gc, stamp) }
      Profile.new(bytes, stats.merge(ractors: RactorCheck.stat(self)), kind: :heap)
    end

    # Keep each sampled allocation's time (about 40 bytes a sample until the
    # flush) for #take_firefox_part; Session turns it on for a combined
    # Firefox file, before start.
    def keep_allocation_timeline!
      @lock.synchronize { @collector.keep_alloc_events = true }
      self
    end

    # The flush, with its rows and sampled allocations moved into `parts`
    # (a Native::FirefoxParts) instead of encoded as pprof: the allocation
    # table of a combined Firefox file. Returns the flush's stats.
    def take_firefox_part(parts, gc: false)
      gc = Options.boolean("gc", gc)
      _bytes, stats = @lock.synchronize { @collector.flush_into(parts, gc) }
      stats
    end

    # [[site, object], ...] for up to `limit` live sampled objects, site
    # naming where each was allocated ("String#* ← Foo#bar foo.rb:12").
    # Exact mode reports the objects not yet freed, Ruby's internal ones left
    # out, with the GC held off while the array is built (so none is freed
    # under it): run GC.start first, or garbage not yet collected is among
    # them. The objects are kept alive while the caller holds the array.
    # Used to explain the top sites with a retention snapshot.
    def live_objects(limit: 100_000)
      limit = Options.integer("limit", limit, LIVE_OBJECTS_LIMIT)
      @lock.synchronize { @collector.live_objects(limit) }
    end

    # The `top` allocation sites with the most live objects (among the
    # first `limit` live records, most first, ties by site), each with its
    # first `per_site` objects pushed onto `focus` (an Array):
    # [[site, live objects, objects pushed], ...]. Unlike live_objects it
    # makes no Ruby object per live object: the retention snapshot that
    # follows, which scans the C stack conservatively, must find them only
    # in `focus` (Retention.explain_sites calls it where the stack is
    # zeroed afterwards; docs/internals/retention.md, "Why the top sites
    # are alive"). Exact mode: run GC.start first, as for live_objects.
    def live_sites(top:, per_site:, focus:, limit: 100_000)
      top = Options.integer("top", top, LIVE_OBJECTS_LIMIT)
      per_site = Options.integer("per_site", per_site, LIVE_OBJECTS_LIMIT)
      limit = Options.integer("limit", limit, LIVE_OBJECTS_LIMIT)
      raise TypeError, "fathom: focus must be an Array, got #{Options.describe(focus)}" unless Array === focus

      @lock.synchronize { @collector.live_sites(top, per_site, limit, focus) }
    end

    def inspect
      "#<#{self.class} exact=#{@exact} interval=#{Options.format_ns(@interval_ns)} " \
        "max_depth=#{@max_depth} #{running? ? "running" : "stopped"}>"
    end
  end

  # Its first name, kept so that code written for it runs unchanged.
  MemoryProfiler = HeapProfiler
end
