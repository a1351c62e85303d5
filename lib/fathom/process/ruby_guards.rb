# frozen_string_literal: true

require_relative "../error"
require_relative "ruby_version"

module Fathom
  # Refusals for what a Ruby would get wrong: a clear error when a profiler
  # starts, rather than an exception inside a GC hook (a crash) or a
  # profile with a wrong answer. Each guard reads the Ruby through
  # RubyVersion, which tests fake. What each one is about, and where it was
  # read: docs/internals/versions.md, "Ruby 4.0". Only the logic is run on
  # the project's Rubies (3.1, 3.3, 3.4); the 4.0 facts behind it were read.
  module RubyGuards
    # object_id liveness tokens ask ObjectSpace._id2ref whether a sampled
    # object is still alive. Ruby 4.0 deprecates it (Feature #15408) and on
    # 4.0.x it can return another live object for a dead one's id (Bug
    # #22200): a freed sample would count as live, with nothing to say so.
    # 4.1 removes it (Feature #22135).
    #
    # Refused rather than replaced by :weakmap with a notice: nobody gets
    # :object_id without asking for it by name (:auto picks :weakmap from
    # 3.2.3 on), and whoever asks is comparing the two modes or working
    # around one, which a silent swap would defeat. :weakmap gives the same
    # figures on every Ruby from 3.2.3.
    OBJECT_ID_LIVENESS_REFUSED_FROM = "4.0"

    # What each feature reads from Ruby's GC by key, from C (a missing key
    # raises ArgumentError there, inside a GC hook or a flush):
    #   heap       allocation_hooks.cc (total_allocated_objects),
    #              live_census.cc (compact_count)
    #   gc         gc_collector.cc (the counters, and the cause and reason
    #              of each GC)
    #   retention  retention_snapshot.cc and retention.rb (the graph's and
    #              the forked child's size)
    #   dump       the dump endpoint (its size check); the child walks the
    #              heap with rb_objspace_* (forked_dump.cc)
    # CPU and wall profiling read none of them.
    GC_KEYS = {
      heap: { stat: %i[total_allocated_objects compact_count] },
      gc: { stat: %i[heap_live_slots time minor_gc_count major_gc_count], latest_gc_info: %i[major_by gc_by] },
      retention: { stat: %i[heap_live_slots heap_available_slots] },
      dump: { stat: %i[heap_live_slots] },
    }.freeze
    FEATURES = { heap: "heap profiling", gc: "GC profiling", retention: "a retention snapshot", dump: "a heap dump" }.freeze

    module_function

    # The liveness a HeapProfiler may use (:object_id or :weakmap, :auto
    # already resolved). ArgumentError, naming the option, for :object_id
    # where _id2ref cannot answer right.
    def liveness!(liveness)
      return liveness unless liveness == :object_id

      ruby = RubyVersion.current
      unless RubyVersion.id2ref_defined?
        raise ArgumentError, "fathom: liveness: :object_id is not supported on Ruby #{ruby}: it needs " \
                             "ObjectSpace._id2ref, which this Ruby no longer has (Feature #22135); use liveness: :weakmap"
      end
      if RubyVersion.at_least?(OBJECT_ID_LIVENESS_REFUSED_FROM)
        raise ArgumentError, "fathom: liveness: :object_id is not supported on Ruby #{ruby} yet: ObjectSpace._id2ref " \
                             "is deprecated there and can return another live object for a dead object's id " \
                             "(Ruby Bug #22200), which would count freed samples as live; use liveness: :weakmap " \
                             "(what :auto picks on this Ruby)"
      end
      liveness
    end

    # Why `feature` (a key of GC_KEYS; any other needs nothing) cannot run
    # on this Ruby, or nil.
    def gc_refusal(feature)
      keys = GC_KEYS[feature]
      return nil unless keys

      name = FEATURES.fetch(feature)
      gc = RubyVersion.gc_implementation
      unless gc == "default"
        # MMTk's GC.stat has none of the default GC's heap keys, its
        # GC.latest_gc_info only :state, and its event hooks are not wired
        # (gc/mmtk/mmtk.c: rb_gc_impl_set_event_hook is empty): hooks
        # would see nothing and the counters would raise.
        return "#{name} is not supported with the #{gc.inspect} GC (RUBY_GC_LIBRARY): Fathom reads the default " \
               "GC's event hooks, GC.stat keys and heap pages"
      end

      missing = (keys.fetch(:stat, []) - RubyVersion.gc_stat_keys).map { |k| "GC.stat(:#{k})" }
      missing += (keys.fetch(:latest_gc_info, []) - RubyVersion.latest_gc_info_keys).map { |k| "GC.latest_gc_info(:#{k})" }
      return nil if missing.empty?

      "#{name} is not supported on Ruby #{RubyVersion.current} yet: it reads #{missing.join(", ")}, " \
        "which this Ruby's GC does not have"
    end

    # Raises Fathom::Error with gc_refusal's reason. what: the API refusing,
    # e.g. "Fathom::GcProfiler#start".
    def refuse_gc!(feature, what)
      reason = gc_refusal(feature)
      raise Fathom::Error, "fathom: #{what}: #{reason}" if reason
    end
  end
end
