# frozen_string_literal: true

require_relative "units"

module Fathom
  module Report
    # `fathom report` on a Firefox Profiler file written by the GC profiler:
    # the same counts and totals as the pprof summary, read from the "GC"
    # markers of the "Garbage Collection" track (one marker per coalesced
    # period). Pause percentiles are only in the pprof (its comment); here
    # the longest period's GC time is shown instead.
    #
    # A Firefox file has no sample types, so a sample_index (which would
    # be silently ignored) is refused.
    class FirefoxSummary
      def initialize(json, sample_index: nil)
        unless sample_index.nil?
          raise ArgumentError, "fathom: sample_index does not apply to a Firefox Profiler file (it has no sample " \
                               "types; the summary shows wall, cpu, steps and GCs together). Write the GC profile " \
                               "as pprof to sort by one of them"
        end

        @json = json
        @markers = gc_markers
      end

      def to_s
        duration_ms = @json.dig("meta", "profilingEndTime").to_f - @json.dig("meta", "profilingStartTime").to_f
        by_type = Hash.new(0)
        @markers.each { |m| by_type[m["gc_type"]] += m["gcs"].to_i }
        gc_ms = @markers.sum { |m| m["gc_ms"].to_f }
        cpu_ms = @markers.sum { |m| m["cpu_ms"].to_f }
        longest = @markers.map { |m| m["gc_ms"].to_f }.max || 0
        out = +"GC profile (Firefox Profiler format; open it at https://profiler.firefox.com)\n"
        out << "#{fmt(duration_ms)} of wall time, #{by_type.values.sum} GCs " \
               "(#{by_type["minor"]} minor, #{by_type["major"]} major), #{@markers.size} periods\n"
        share = duration_ms.positive? ? " (#{Units.percentage(gc_ms, duration_ms).strip})" : ""
        out << "time in GC      #{fmt(gc_ms)} wall#{share}, #{fmt(cpu_ms)} CPU, " \
               "#{@markers.sum { |m| m["steps"].to_i }} steps\n"
        out << "longest period  #{fmt(longest)} in GC\n"
        out
      end

      private

      def fmt(ms)
        Units.format_value((ms * 1_000_000).round, "nanoseconds")
      end

      def gc_markers
        threads = @json["threads"]
        raise ArgumentError, "fathom: not a Firefox Profiler profile (no threads)" unless threads.is_a?(Array)

        threads.flat_map do |t|
          data = t.dig("markers", "data") || []
          data.select { |d| d.is_a?(Hash) && d["type"] == "GC" }
        end
      end
    end
  end
end
