# frozen_string_literal: true

require_relative "units"
require_relative "arguments"
require_relative "../options"

module Fathom
  module Report
    # The `go tool pprof -top` table for a decoded profile (Fathom::Pprof::Profile):
    #
    #   Type: inuse_space
    #   Showing nodes accounting for 1.20MB, 95.00% of 1.26MB total
    #         flat  flat%   sum%        cum   cum%
    #       1.20MB 95.00% 95.00%     1.20MB 95.00%  Foo#bar
    #
    # Rows are functions (by name, like pprof's default granularity). flat is
    # the value of the samples whose leaf frame is the function; cum is the
    # value of the samples whose stack contains it anywhere, counted once per
    # sample even when the function recurses. Sorted by flat (descending),
    # then name. Samples whose selected value is 0 are ignored, as in pprof.
    class Top
      Row = Struct.new(:name, :flat, :cum)

      # The label summarized below the table when samples carry it.
      SUMMARY_LABEL = "class"

      attr_reader :sample_type, :unit, :top

      # sample_index: a sample type name (or its Integer position); nil picks
      # the profile's default_sample_type, else the last type (pprof's rule).
      # top: how many rows to show (nil, or more than there are: all).
      def initialize(profile, sample_index: nil, top: 20)
        @top = Options.row_limit("top", top)
        @profile = Report.check_profile!(profile)
        @index = SampleIndex.resolve(profile, sample_index)
        @sample_type, @unit = profile.sample_types.fetch(@index)
      end

      def total
        compute
        @total
      end

      # All rows, sorted.
      def rows
        compute
        @rows
      end

      def shown_rows
        @top ? rows.first(@top) : rows
      end

      # [[label value, sum], ...] for one label key, largest first (samples
      # without the label are grouped under "<none>").
      def by_label(key)
        sums = Hash.new(0)
        each_valued_sample do |sample, value|
          label = sample.labels[key]
          label = label.compact.join(" ") if label.is_a?(Array)
          sums[label || "<none>"] += value
        end
        sums.sort_by { |name, value| [-value, name.to_s] }
      end

      def to_s
        out = +""
        header_lines.each { |line| out << line << "\n" }
        out << format("%10s %5s%% %5s%% %10s %5s%%\n", "flat", "flat", "sum", "cum", "cum")
        running = 0
        shown_rows.each do |row|
          running += row.flat
          out << format("%10s %s %s %10s %s  %s\n",
                        fmt(row.flat), pct(row.flat), pct(running), fmt(row.cum), pct(row.cum), row.name)
        end
        out << label_summary(SUMMARY_LABEL)
        out
      end

      private

      def fmt(value)
        Units.format_value(value, @unit, output_unit)
      end

      # One unit for the whole table, chosen like pprof's default -unit=minimum:
      # the unit of the smallest shown value, unless the total is over 100x
      # larger in a bigger unit; then small values may print as 0.01MB.
      def output_unit
        @output_unit ||= begin
          min = shown_rows.map { |r| r.flat.zero? ? r.cum.abs : r.flat.abs }.reject(&:zero?).min || total.abs
          min_unit = Units.auto_unit(min, @unit)
          if min_unit != Units.auto_unit(total, @unit) && min * 100 < total.abs
            Units.auto_unit(min * 100, @unit)
          else
            min_unit
          end
        end
      end

      def pct(value)
        Units.percentage(value, total)
      end

      def header_lines
        lines = @profile.comments.reject { |c| c.start_with?("#") }
        lines << "Type: #{@sample_type}"
        lines << "Time: #{Time.at(0, @profile.time_nanos, :nsec).utc.strftime("%Y-%m-%d %H:%M:%S UTC")}" unless @profile.time_nanos.zero?
        lines << "Duration: #{Units.format_value(@profile.duration_nanos, "nanoseconds")}" unless @profile.duration_nanos.zero?
        shown = shown_rows
        flat_sum = shown.sum(&:flat)
        lines << "Showing nodes accounting for #{fmt(flat_sum)}, #{pct(flat_sum).strip} of #{fmt(total)} total"
        lines << "Showing top #{shown.size} nodes out of #{rows.size}" if shown.size < rows.size
        lines
      end

      def label_summary(key)
        return "" unless @profile.samples.any? { |s| s.labels.key?(key) }

        sums = by_label(key)
        shown = @top ? sums.first(@top) : sums
        out = +"\nBy #{key} (#{@sample_type}):\n"
        out << format("%10s %5s%%  %s\n", "flat", "flat", key)
        shown.each { |name, value| out << format("%10s %s  %s\n", fmt(value), pct(value), name) }
        out
      end

      def each_valued_sample
        index = @index
        @profile.samples.each do |sample|
          value = sample.values[index]
          yield sample, value unless value.zero?
        end
      end

      def compute
        return if @rows

        flat = Hash.new(0)
        cum = Hash.new(0)
        total = 0
        names_of = location_names
        seen = {}
        each_valued_sample do |sample, value|
          total += value
          ids = sample.location_ids
          next if ids.empty?

          flat[names_of[ids[0]][0]] += value
          seen.clear
          ids.each do |id|
            names_of[id].each do |name|
              next if seen.key?(name)

              seen[name] = true
              cum[name] += value
            end
          end
        end
        @total = total
        @rows = cum.map { |name, c| Row.new(name, flat[name], c) }
                   .sort_by! { |r| [-r.flat.abs, r.name] }
      end

      # location id => function names of its lines (innermost first), computed
      # once per location rather than once per frame.
      def location_names
        @profile.locations.to_h do |id, lines|
          names = lines.map { |function_id, _| @profile.function_name(function_id) }
          [id, names.empty? ? ["<location #{id}>"] : names]
        end
      end
    end
  end
end
