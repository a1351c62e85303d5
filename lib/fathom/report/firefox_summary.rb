# frozen_string_literal: true

require_relative "units"
require_relative "gc_off_cpu"
require_relative "../error"
require_relative "firefox_fields"

module Fathom
  module Report
    # `fathom report` on a Firefox Profiler file written by the GC profiler:
    # the same counts and totals as the pprof summary, read from the markers
    # of the "Garbage Collection" track. Pause percentiles are only in the
    # pprof (its comment); here the longest period's GC time is shown instead.
    # Two marker types, one per source:
    #   "GC"      hooks: one marker per coalesced period of one type, with
    #             wall (gc_ms) and CPU time and steps;
    #   "GCPoll"  counters: one marker per read of Ruby's GC counters, with
    #             minor_gcs, major_gcs and cpu_ms (GC.stat(:time)) only, so
    #             the summary shows no wall time or steps for them.
    #
    # The JSON is read defensively (it is a file from anywhere): a missing
    # number counts as 0, markers of other types are skipped, and anything of
    # the wrong shape (threads that are not objects, a gc_ms that is a
    # string, numbers too large to add up) raises Fathom::Error.
    #
    # A Firefox file has no sample types, so a sample_index (which would
    # be silently ignored) is refused.
    class FirefoxSummary
      include FirefoxFields
      private :object, :array, :number

      MARKER_TYPES = %w[GC GCPoll].freeze

      # The summed time in GC of the markers, in ms: wall time for the hooks'
      # markers, CPU time (GC.stat(:time)) for the counters' (counters?).
      attr_reader :gc_ms

      def initialize(json, sample_index: nil)
        unless NilClass === sample_index
          raise ArgumentError, "fathom: sample_index does not apply to a Firefox Profiler file (it has no sample " \
                               "types; the summary shows wall, cpu, steps and GCs together). Write the GC profile " \
                               "as pprof to sort by one of them"
        end
        raise Fathom::Error, "fathom: not a Firefox Profiler profile (not a JSON object)" unless Hash === json

        @json = json
        markers = gc_markers
        meta = object(@json["meta"], "meta")
        @duration_ms = number(meta["profilingEndTime"], "meta.profilingEndTime") -
                       number(meta["profilingStartTime"], "meta.profilingStartTime")
        @hooks = markers.select { |m| m["type"] == "GC" }
        @polls = markers.reject { |m| m["type"] == "GC" }
        @by_type = Hash.new(0)
        @hooks.each { |m| @by_type[m["gc_type"]] += number(m["gcs"], "gcs").to_i }
        @polls.each do |m|
          @by_type["minor"] += number(m["minor_gcs"], "minor_gcs").to_i
          @by_type["major"] += number(m["major_gcs"], "major_gcs").to_i
        end
        @cpu_ms = markers.sum { |m| number(m["cpu_ms"], "cpu_ms") }
        @gc_ms = counters? ? @cpu_ms : @hooks.sum { |m| number(m["gc_ms"], "gc_ms") }
        @steps = @hooks.sum { |m| number(m["steps"], "steps").to_i }
        time_key = counters? ? "cpu_ms" : "gc_ms"
        @longest = (counters? ? @polls : @hooks).map { |m| number(m[time_key], time_key) }.max || 0
        @count = markers.size
      end

      # Whether the file came from the counters source (GCPoll markers, and
      # no hooks' ones): then its only time is CPU time.
      def counters?
        @hooks.empty? && !@polls.empty?
      end

      def to_s
        out = +"GC profile (Firefox Profiler format; open it at https://profiler.firefox.com)\n"
        what = counters? ? "read#{"s" unless @count == 1} of Ruby's GC counters that saw GCs" : "periods"
        out << "#{fmt(@duration_ms)} of wall time, #{@by_type.values.sum} GCs " \
               "(#{@by_type["minor"]} minor, #{@by_type["major"]} major), #{@count} #{what}\n"
        if counters?
          share = @duration_ms.positive? ? " (#{Units.percentage(@cpu_ms, @duration_ms).strip} of the wall time)" : ""
          out << "time in GC      #{fmt(@cpu_ms)} CPU#{share}, from GC.stat(:time) (source: counters; no wall " \
                 "time or steps)\n"
          out << "longest read    #{fmt(@longest)} CPU in GC\n"
        else
          share = @duration_ms.positive? ? " (#{Units.percentage(@gc_ms, @duration_ms).strip})" : ""
          out << "time in GC      #{fmt(@gc_ms)} wall#{share}, #{fmt(@cpu_ms)} CPU, #{@steps} steps\n"
          out << GcOffCpu.line(@gc_ms * 1_000_000, @cpu_ms * 1_000_000).to_s
          out << "longest period  #{fmt(@longest)} in GC\n"
        end
        out
      end

      private

      def fmt(ms)
        ns = ms * 1_000_000
        raise Fathom::Error, "fathom: not a usable Firefox Profiler profile: times out of range" unless ns.finite?

        Units.format_value(ns.round, "nanoseconds")
      end

      def gc_markers
        threads = @json["threads"]
        raise Fathom::Error, "fathom: not a Firefox Profiler profile (no threads)" unless Array === threads

        threads.flat_map do |t|
          markers = object(object(t, "threads[]")["markers"], "markers")
          data = markers["data"] || []
          raise Fathom::Error, "fathom: not a Firefox Profiler profile (markers.data is not an array)" unless Array === data

          data.select { |d| Hash === d && MARKER_TYPES.include?(d["type"]) }
        end
      end
    end
  end
end
