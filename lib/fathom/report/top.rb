# frozen_string_literal: true

require_relative "units"
require_relative "arguments"
require_relative "sample_interval"
require_relative "grouping"
require_relative "view"
require_relative "heading"
require_relative "source"
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
    # Rows are functions by default (by name, like pprof's default
    # granularity); `by:` groups them otherwise (Grouping: site, line, file,
    # gem, class), and `sort: :cum` orders them by cum. flat is
    # the value of the samples whose leaf frame is the function; cum is the
    # value of the samples whose stack contains it anywhere, counted once per
    # sample even when the function recurses. Sorted by flat (or cum)
    # descending, then name. Samples whose selected value is 0 are ignored,
    # as in pprof.
    #
    # The header says what the profile is in one line (Heading); the
    # writer's own comments and the notes on how sampled values are
    # estimated are printed with notes: true.
    #
    # Sampled heap profiles also carry, per row, how many sample records
    # stand behind its alloc_* and inuse_* values (alloc_samples,
    # inuse_samples). The table then shows them for flat, with flat%'s 95%
    # interval (SampleInterval), and marks with "?" the rows that rest on
    # too few samples to be more than a guess.
    class Top
      Row = Struct.new(:name, :flat, :cum, :samples)
      FEW_MARK = "?"
      CENSUS_COMMENT = "Live bytes: calibrated to a heap census"
      # A sampled profile whose in-use value is this much in "[not sampled]"
      # rows (or rests on too few samples) gets one warning line that says
      # to rerun with --exact.
      NOT_SAMPLED_SHARE = 0.2
      NOT_SAMPLED = "[not sampled]"
      CENSUS_NOTE = "inuse_* are calibrated to a heap census of the live objects allocated since start: a row is " \
                    "exact where its site is the only one sampled in its class and size class, so the interval " \
                    "(from the sample count alone) overstates its uncertainty; \"[not sampled]\" rows are live " \
                    "objects whose class and size no sample reached (big, rare objects, most often: sampling " \
                    "picks allocations by count, not by size; exact mode, --exact or ?fathom=heap, names their " \
                    "sites).\n"

      # The label summarized below the table when samples carry it.
      SUMMARY_LABEL = "class"

      attr_reader :sample_type, :unit, :top, :by, :sort

      # sample_index: a sample type name (or its Integer position); nil picks
      # the profile's default_sample_type, else the last type (pprof's rule).
      # top: how many rows to show (nil, or more than there are: all).
      # by: the rows (View::BY; default :function), sort: :flat or :cum.
      # notes: the writer's comments and the estimation notes in full.
      # filters: what View#apply did to the profile, said in the header.
      def initialize(profile, sample_index: nil, top: 20, by: :function, sort: :flat, notes: false, filters: nil)
        @top = Options.row_limit("top", top)
        @profile = Report.check_profile!(profile)
        @index = SampleIndex.resolve(profile, sample_index)
        @sample_type, @unit = profile.sample_types.fetch(@index)
        @count_index = sample_count_index
        @by = Options.one_of("by", by, View::BY)
        @sort = Options.one_of("sort", sort, View::SORTS)
        @notes = Options.boolean("notes", notes)
        @filters = filters
        @grouping = Grouping.new(profile, @by)
        @source = Source.new
      end

      # The Frame a row stands for (by site, line or file), or nil.
      def frame_of(row)
        @grouping.frame_of(row.name)
      end

      # Whether rows carry sample counts (a sampled heap profile read on a
      # value type they stand behind).
      def uncertain?
        !@count_index.nil?
      end

      # Sample records behind the whole selected value (nil without counts).
      def total_samples
        compute
        @total_samples
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
        if uncertain?
          out << format("%10s %5s%% %5s%% %10s %5s%% %8s  %-17s\n", "flat", "flat", "sum", "cum", "cum", "samples",
                        "flat% 95% interval")
        else
          out << format("%10s %5s%% %5s%% %10s %5s%%\n", "flat", "flat", "sum", "cum", "cum")
        end
        running = 0
        shown_rows.each do |row|
          running += row.flat
          out << format("%10s %s %s %10s %s ", fmt(row.flat), pct(row.flat), pct(running), fmt(row.cum), pct(row.cum))
          out << format("%8d%s %-16s", row.samples, few?(row) ? FEW_MARK : " ", interval(row)) if uncertain?
          out << " " << row_label(row) << "\n"
        end
        out << uncertainty_note if uncertain?
        out << label_summary(SUMMARY_LABEL) unless @by == :class
        out
      end

      # What the table calls the values and rows, for a header line.
      def rows_text
        case @by
        when :function then "functions"
        when :site then "sites (the innermost Ruby line of each stack; C methods folded into the line that called them)"
        when :line then "lines (the innermost Ruby line of each stack, with its source)"
        when :file then "files (of the innermost Ruby line)"
        when :gem then "gems (of the innermost Ruby line: a gem, a stdlib library, or app)"
        else "classes"
        end
      end

      # Share of the selected value in "[not sampled]" rows.
      def not_sampled_share
        return 0.0 if total.zero?

        rows.sum { |r| r.name.start_with?(NOT_SAMPLED) ? r.flat : 0 }.fdiv(total).abs
      end

      # Whether a row rests on too few samples to be more than a guess.
      # (A row with no flat value of its own, only cum, is not marked.)
      def few?(row)
        uncertain? && !row.flat.zero? && SampleInterval.few?(row.samples)
      end

      # [low%, high%] of a row's flat share, or nil without sample counts.
      def flat_share_interval(row)
        return nil unless uncertain? && row.samples.positive?

        share = total.zero? ? 0.0 : 100.0 * row.flat.abs / total.abs
        low, high = SampleInterval.factors(row.samples)
        [share * low, [share * high, 100.0].min]
      end

      private

      # A row's name, and for --by line the code on that line.
      def row_label(row)
        return row.name unless @by == :line

        frame = frame_of(row)
        code = frame && @source.line(frame.file, frame.line)
        code ? "#{row.name}  #{code}" : row.name
      end

      def interval(row)
        low, high = flat_share_interval(row)
        low ? format("%.3g%%..%.3g%%", low, high) : "-"
      end

      # One line by default (the legend of "?", when a shown row has it);
      # the whole explanation with notes.
      def uncertainty_note
        few = shown_rows.count { |r| few?(r) }
        note = +""
        if @notes
          note << "\nsamples: sample records behind flat (#{total_samples} behind the total); the interval is 95% for " \
                  "flat%, from the sample count alone.\n"
        elsif few.positive?
          note << "\n"
        end
        if few.positive?
          note << "#{FEW_MARK}: fewer than #{SampleInterval::MIN_SAMPLES} samples behind the row, a guess rather " \
                  "than a measurement (#{few} of #{shown_rows.size} shown rows).\n"
        end
        note << CENSUS_NOTE if @notes && census_calibrated?
        note
      end

      # Live values calibrated to a heap census
      # (docs/internals/heap.md, "Calibrating live bytes to a heap census"): the profile says so in a
      # comment.
      def census_calibrated?
        @sample_type.start_with?("inuse") && @profile.comments.any? { |c| c.start_with?(CENSUS_COMMENT) }
      end

      # Index of the sample type counting the records behind the selected
      # one; nil for exact-mode profiles (every allocation: nothing to
      # guess) and for profiles without counts.
      def sample_count_index
        return nil if @profile.period_type == %w[allocations count]

        type = SampleInterval.count_type(@sample_type, @profile.sample_type_names)
        type && @profile.sample_type_index(type)
      end

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
        lines = []
        summary = Heading.summary(@profile.comments)
        if @notes || summary.nil?
          lines.concat(@profile.comments.reject { |c| c.start_with?("#") })
        else
          lines << summary
        end
        lines << "Type: #{@sample_type}"
        lines << "Time: #{Time.at(0, @profile.time_nanos, :nsec).utc.strftime("%Y-%m-%d %H:%M:%S UTC")}" unless @profile.time_nanos.zero?
        lines << "Duration: #{Units.format_value(@profile.duration_nanos, "nanoseconds")}" unless @profile.duration_nanos.zero?
        shown = shown_rows
        flat_sum = shown.sum(&:flat)
        lines << "Showing nodes accounting for #{fmt(flat_sum)}, #{pct(flat_sum).strip} of #{fmt(total)} total"
        if uncertain? && total_samples.zero?
          lines << "Warning: no sample stands behind #{@sample_type}: this profile cannot tell " \
                   "(profile for longer, or with a shorter interval)"
        elsif uncertain? && SampleInterval.few?(total_samples) && !exact_warning
          lines << "Warning: the whole #{@sample_type} rests on #{total_samples} sample#{"s" unless total_samples == 1}: " \
                   "every share below is a guess (profile for longer, or with a shorter interval)"
        end
        lines << "Showing top #{shown.size} nodes out of #{rows.size}" if shown.size < rows.size
        lines << "Rows: #{rows_text}#{", by cum" if @sort == :cum}" unless @by == :function && @sort == :flat
        lines << "Filtered: #{@filters}" if @filters && !@filters.empty?
        lines << lost_ticks_warning if lost_ticks_warning
        lines << exact_warning if exact_warning
        lines << empty_warning if empty_warning
        lines
      end

      # One line when a sampled heap profile cannot name where its in-use
      # memory comes from: a large share in "[not sampled]" rows, or a
      # total on too few samples. A short run is cheap to rerun exactly.
      def exact_warning
        return @exact_warning if defined?(@exact_warning)

        @exact_warning =
          if uncertain? && @sample_type.start_with?("inuse") && !total.zero?
            share = not_sampled_share
            if share >= NOT_SAMPLED_SHARE
              "Warning: #{format("%.0f", share * 100)}% of #{@sample_type} is in \"#{NOT_SAMPLED}\" rows, live objects " \
                "no sample reached: rerun with --exact to name their lines#{short_run_hint}"
            elsif SampleInterval.few?(total_samples.to_i) && total_samples.to_i.positive?
              "Warning: the whole #{@sample_type} rests on #{total_samples} sample#{"s" unless total_samples == 1}: " \
                "every share below is a guess; rerun with --exact to measure it#{short_run_hint}"
            end
          end
      end

      def short_run_hint
        seconds = @profile.duration_nanos / 1e9
        return "" if @profile.duration_nanos.zero?

        seconds < 60 ? " (this run took #{Units.format_value(@profile.duration_nanos, "nanoseconds")}: " \
                       "exact mode suits a run this short)" : " (or profile with a shorter --interval)"
      end

      # A profile (or a filtered view of one) with nothing in it: said, not
      # left as an empty table.
      def empty_warning
        return nil unless rows.empty?

        if @profile.samples.empty? && @filters && !@filters.empty?
          "Warning: no sample is left after #{@filters}"
        elsif @profile.samples.empty?
          "Warning: the profile has no samples#{empty_reason}"
        else
          "Warning: no sample has a #{@sample_type} value#{empty_reason}"
        end
      end

      def empty_reason
        m = @profile.comments.lazy.map { |c| Heading::CPU.match(c) }.find(&:itself)
        return "" unless m

        " (a thread is sampled every #{Units.format_value(m[2].to_i, "nanoseconds")} of its " \
          "#{m[1] == "wall" ? "wall" : "CPU"} time: the program ran for less than that, or in threads that never " \
          "ran Ruby; profile for longer, or with a shorter --interval)"
      end

      SAMPLING_COMMENT = /\ASampling: (\d+) bursts from (\d+) timer ticks that could start one/

      # The heap sampler says how many of its timer ticks became bursts of
      # samples (core/heap_sampling/tick_accounting.h). When most were lost on their
      # way to Ruby the profile is much sparser than its interval, and
      # leans towards the moments the ticks did get through: say so. Same
      # rule as the core's MostTicksLost: over half of at least 20.
      def lost_ticks_warning
        return @lost_ticks_warning if defined?(@lost_ticks_warning)

        m = @profile.comments.lazy.map { |c| SAMPLING_COMMENT.match(c) }.find(&:itself)
        bursts, eligible = m && [m[1].to_i, m[2].to_i]
        @lost_ticks_warning =
          if bursts && eligible >= 20 && (eligible - bursts) * 2 > eligible
            "Warning: only #{bursts} of #{eligible} timer ticks reached Ruby code (the others were lost on their " \
              "way to the thread holding the GVL): the sample is sparser than its interval says and may lean " \
              "towards the moments the ticks got through"
          end
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
        samples = Hash.new(0)
        total = 0
        total_samples = 0
        count_index = @count_index
        grouping = @grouping
        each_valued_sample do |sample, value|
          total += value
          n = count_index ? sample.values[count_index] : 0
          total_samples += n
          flat_key, cum_keys = grouping.keys(sample)
          next unless flat_key

          flat[flat_key] += value
          samples[flat_key] += n
          cum_keys.each { |key| cum[key] += value }
        end
        @total = total
        @total_samples = count_index ? total_samples : nil
        @rows = cum.map { |name, c| Row.new(name, flat[name], c, samples[name]) }
        @rows.sort_by! { |r| @sort == :cum ? [-r.cum.abs, -r.flat.abs, r.name] : [-r.flat.abs, r.name] }
      end
    end
  end
end
