# frozen_string_literal: true

require_relative "units"
require_relative "../error"
require_relative "firefox_fields"

module Fathom
  module Report
    # `fathom report` on a Firefox Profiler file written by the GC profiler:
    # the same counts and totals as the pprof summary, read from the "GC"
    # markers of the "Garbage Collection" track (one marker per coalesced
    # period). Pause percentiles are only in the pprof (its comment); here
    # the longest period's GC time is shown instead.
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

      # The summed GC wall time of the markers, in ms.
      attr_reader :gc_ms

      def initialize(json, sample_index: nil)
        unless NilClass === sample_index
          raise ArgumentError, "fathom: sample_index does not apply to a Firefox Profiler file (it has no sample " \
                               "types; the summary shows wall, cpu, steps and GCs together). Write the GC profile " \
                               "as pprof to sort by one of them"
        end
        raise Fathom::Error, "fathom: not a Firefox Profiler profile (not a JSON object)" unless Hash === json

        @json = json
        @markers = gc_markers
        meta = object(@json["meta"], "meta")
        @duration_ms = number(meta["profilingEndTime"], "meta.profilingEndTime") -
                       number(meta["profilingStartTime"], "meta.profilingStartTime")
        @by_type = Hash.new(0)
        @markers.each { |m| @by_type[m["gc_type"]] += number(m["gcs"], "gcs").to_i }
        @gc_ms = @markers.sum { |m| number(m["gc_ms"], "gc_ms") }
        @cpu_ms = @markers.sum { |m| number(m["cpu_ms"], "cpu_ms") }
        @steps = @markers.sum { |m| number(m["steps"], "steps").to_i }
        @longest = @markers.map { |m| number(m["gc_ms"], "gc_ms") }.max || 0
      end

      def to_s
        out = +"GC profile (Firefox Profiler format; open it at https://profiler.firefox.com)\n"
        out << "#{fmt(@duration_ms)} of wall time, #{@by_type.values.sum} GCs " \
               "(#{@by_type["minor"]} minor, #{@by_type["major"]} major), #{@markers.size} periods\n"
        share = @duration_ms.positive? ? " (#{Units.percentage(@gc_ms, @duration_ms).strip})" : ""
        out << "time in GC      #{fmt(@gc_ms)} wall#{share}, #{fmt(@cpu_ms)} CPU, #{@steps} steps\n"
        out << "longest period  #{fmt(@longest)} in GC\n"
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

          data.select { |d| Hash === d && d["type"] == "GC" }
        end
      end
    end
  end
end
