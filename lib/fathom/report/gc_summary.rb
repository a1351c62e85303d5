# frozen_string_literal: true

require_relative "units"
require_relative "gc_off_cpu"
require_relative "../error"
require_relative "arguments"

module Fathom
  module Report
    # The text summary of a GC profile (pprof written by Fathom::GcProfiler):
    #
    #   GC profile: 2.51s of wall time, 153 GCs (103 minor, 50 major)
    #   time in GC      204.73ms wall (8.16%), 203.4ms CPU, 987 steps
    #   pauses (steps)  p50 18.43us  p90 425.98us  p99 2.88ms  longest 3.71ms
    #
    #   by type, reason and cause
    #          wall   wall%     cpu  steps   GCs  type   reason   cause
    #    130.26ms  63.63% 129.99ms     48    48  major  force    method
    #   ...
    #
    # GC counts come from the gcs/count sample type, grouped by the "gc type"
    # label; pause percentiles from the "fathom.gc.pauses" comment, which
    # the collector fills from a histogram of every step (within 25%).
    #
    # Two layouts, by sample type. The hooks source writes wall, cpu,
    # gc_steps and gcs. The counters source (gc_source: :counters) measures
    # no wall time and no steps: its file has cpu (GC.stat(:time), process
    # CPU time in GC) and gcs only, and its table shows just those columns,
    # with "-" where a row's time is not known (the "unseen" GCs, whose time
    # Ruby adds to the latest GC's).
    #
    # sample_index (a sample type name or position: wall, cpu, gc_steps,
    # gcs, those the profile has) picks the column the table is sorted by;
    # the profile's default (wall, or cpu for counters) when not given. The
    # totals above the table show every sample type whatever it is.
    class GcSummary
      Row = Struct.new(:type, :reason, :cause, :wall, :cpu, :steps, :gcs)
      # Sample type => Row member. In a counters file a Row's wall and steps
      # are nil (not measured), never 0; a hooks-layout file lacking a type
      # (another writer's) counts it as 0, as before.
      COLUMNS = { "wall" => :wall, "cpu" => :cpu, "gc_steps" => :steps, "gcs" => :gcs }.freeze
      # What the counters source writes.
      COUNTERS_TYPES = %w[cpu gcs].freeze

      # Under the table when the counter source could not see some GCs'
      # cause: it reads Ruby's counters between GCs, and Ruby keeps the
      # reason and cause of the latest GC only (gc_counter_poll.h).
      UNSEEN_NOTE = "unseen: GCs of the other type between two counter reads; Ruby keeps only the latest GC's " \
                    "reason and cause,\n        and the read's GC time is on the latest GC's row " \
                    "(--gc-source hooks sees every GC)\n"

      # Hooks: gc_steps and wall. Counters: gcs and cpu without wall or
      # gc_steps (a CPU profile has samples, cpu and wall, never gcs).
      def self.gc_profile?(profile)
        names = profile.sample_type_names
        (names.include?("gc_steps") && names.include?("wall")) || counters_layout?(names)
      end

      # The sample types of the counters source's file: cpu and gcs, no
      # wall or gc_steps. (Counters files written before that change had
      # wall, cpu and zero gc_steps: they read as the hooks layout.)
      def self.counters_layout?(names)
        COUNTERS_TYPES.all? { |n| names.include?(n) } && !names.include?("wall") && !names.include?("gc_steps")
      end

      def initialize(profile, sample_index: nil)
        Report.check_profile!(profile)
        unless self.class.gc_profile?(profile)
          raise Fathom::Error, "fathom: not a GC profile (no gc_steps and wall, or gcs and cpu, sample types)"
        end

        @profile = profile
        @index = COLUMNS.keys.to_h { |name| [name, profile.sample_type_index(name)] }
        @counters_layout = self.class.counters_layout?(profile.sample_type_names)
        @sort_by = resolve_sort(sample_index)
        @rows = group_rows
        @pauses = parse_pauses
        @source = parse_source
      end

      attr_reader :rows, :pauses

      # {name: "hooks"} or {name: "counters", poll_ns: 10000000}; nil for a
      # profile without the comment (older Fathom, another writer).
      attr_reader :source

      # The sample type the table is sorted by ("wall", "cpu", ...).
      def sample_type
        COLUMNS.key(@sort_by)
      end

      # Whether the file holds only what Ruby's GC counters measure (cpu,
      # gcs): see counters_layout?.
      def counters_layout?
        @counters_layout
      end

      # The sum of a Row member over the rows; nil for what a counters file
      # does not measure (wall, steps).
      def total(name)
        return nil if @counters_layout && !@index[COLUMNS.key(name)]

        @rows.sum { |r| r[name] }
      end

      def gc_count(type = nil)
        @rows.select { |r| type.nil? || r.type == type }.sum(&:gcs)
      end

      def duration_ns
        @profile.duration_nanos.to_i
      end

      def to_s
        out = +""
        out << "GC profile: #{Units.format_value(duration_ns, "nanoseconds")} of wall time, " \
               "#{gc_count} GCs (#{gc_count("minor")} minor, #{gc_count("major")} major)\n"
        out << (@counters_layout ? counters_time_line : time_line)
        out << GcOffCpu.line(total(:wall), total(:cpu)).to_s unless @counters_layout
        out << source_line if @source
        if @pauses
          out << "pauses (steps)  " + %w[p50 p90 p99].map { |k| "#{k} #{fmt(@pauses[:"#{k}_ns"])}" }.join("  ") +
                 "  longest #{fmt(@pauses[:max_ns])}\n"
        end
        return out if @rows.empty?

        out << "\nby type, reason and cause#{" (sorted by #{sample_type})" unless @sort_by == default_sort}\n"
        @counters_layout ? counters_table(out) : table(out)
        out << UNSEEN_NOTE if @rows.any? { |r| r.cause == "unseen" }
        out
      end

      private

      # Wall and CPU time measured per GC step (the hooks source; a counters
      # file of an older Fathom has this layout with zero steps, not shown).
      def time_line
        wall = total(:wall)
        share = duration_ns.positive? ? " (#{Units.percentage(wall, duration_ns).strip})" : ""
        "time in GC      #{fmt(wall)} wall#{share}, #{fmt(total(:cpu))} CPU" \
          "#{", #{total(:steps)} steps" unless @source && @source[:name] == "counters"}\n"
      end

      # The counters' only time: GC.stat(:time), CPU time. Its share of the
      # profile's wall time says how much of the run GC took at least (GC
      # runs on one thread, so its CPU time is not more than its wall time).
      def counters_time_line
        cpu = total(:cpu)
        share = duration_ns.positive? ? " (#{Units.percentage(cpu, duration_ns).strip} of the wall time)" : ""
        "time in GC      #{fmt(cpu)} CPU#{share}, from GC.stat(:time)\n"
      end

      def table(out)
        wall = total(:wall)
        out << format("%10s %7s %10s %7s %6s  %-6s %-10s %s\n", "wall", "wall%", "cpu", "steps", "GCs", "type", "reason", "cause")
        sorted_rows.each do |r|
          out << format("%10s %7s %10s %7d %6d  %-6s %-10s %s\n", fmt(r.wall), Units.percentage(r.wall, wall),
                        fmt(r.cpu), r.steps, r.gcs, r.type, reason(r), r.cause)
        end
      end

      # cpu and GCs only. An "unseen" row's time is "-": not zero, but
      # counted in the row of the GC that was latest in the same read.
      def counters_table(out)
        cpu = total(:cpu)
        out << format("%10s %7s %6s  %-6s %-10s %s\n", "cpu", "cpu%", "GCs", "type", "reason", "cause")
        sorted_rows.each do |r|
          unseen = r.cause == "unseen" && r.cpu.zero?
          out << format("%10s %7s %6d  %-6s %-10s %s\n", unseen ? "-" : fmt(r.cpu),
                        unseen ? "-" : Units.percentage(r.cpu, cpu), r.gcs, r.type, reason(r), r.cause)
        end
      end

      def sorted_rows
        tie = @counters_layout ? :cpu : :wall
        @rows.sort_by { |r| [-r[@sort_by], -r[tie], r.type.to_s, r.reason.to_s, r.cause.to_s] }
      end

      def reason(row)
        row.reason.to_s.empty? ? "-" : row.reason
      end

      # The column the table is sorted by without a sample_index: the
      # profile's default sample type (wall; cpu for counters).
      def default_sort
        @counters_layout ? :cpu : :wall
      end

      # Row member to sort by, from a sample type name (String/Symbol) or
      # its position in the profile; anything else names the valid choices.
      # The SampleIndex rules (name, Symbol or position; ArgumentError for one
      # the profile lacks), then only the columns the table has.
      def resolve_sort(sample_index)
        return default_sort if NilClass === sample_index

        name = @profile.sample_types[SampleIndex.resolve(@profile, sample_index)].first
        return COLUMNS[name] if @index[name]

        raise ArgumentError, "fathom: unknown sample_index #{Options.shown(sample_index.to_s)} for a GC profile " \
                             "(available: #{@index.select { |_, i| i }.keys.join(", ")})"
      end

      def fmt(ns)
        Units.format_value(ns.to_i, "nanoseconds")
      end

      # A sample type's value, nil when the profile does not have it.
      def value(sample, name)
        i = @index[name]
        i && sample.values[i]
      end

      def group_rows
        rows = {}
        @profile.samples.each do |s|
          labels = s.labels
          key = [labels["gc type"], labels["gc reason"], labels["gc cause"]]
          row = rows[key] ||= Row.new(*key, *COLUMNS.keys.map { |name| @counters_layout && !@index[name] ? nil : 0 })
          COLUMNS.each { |name, member| row[member] += value(s, name) if @index[name] }
        end
        rows.values
      end

      # What the source is and what it cannot show.
      def source_line
        if @source[:name] == "counters"
          every = @source[:poll_ns] ? ", read every #{fmt(@source[:poll_ns])}" : ""
          "source          counters: Ruby's GC counters#{every} (no GC hooks). Time in GC is the process CPU time\n" \
            "                Ruby counts in GC.stat(:time), whole ms; wall time, pauses and steps need --gc-source hooks;\n" \
            "                several GCs in one read carry the latest one's type/reason/cause\n"
        else
          "source          GC event hooks (every GC step)\n"
        end
      end

      # "fathom.gc.source=counters poll_ns=10000000" -> {name: "counters", poll_ns: 10000000}
      def parse_source
        line = @profile.comments.to_a.find { |c| c.start_with?("fathom.gc.source=") } or return nil
        name, *rest = line.delete_prefix("fathom.gc.source=").split
        return nil unless %w[hooks counters].include?(name)

        source = { name: name }
        rest.each do |pair|
          k, v = pair.split("=", 2)
          source[:poll_ns] = Integer(v, 10) if k == "poll_ns" && v&.match?(/\A\d{1,19}\z/)
        end
        source
      end

      # "fathom.gc.pauses p50_ns=1 p90_ns=2 ..." -> {p50_ns: 1, ...}; nil
      # when the comment is missing or not in that form (another writer's).
      def parse_pauses
        line = @profile.comments.to_a.find { |c| c.start_with?("fathom.gc.pauses ") } or return nil
        line.split.drop(1).to_h do |pair|
          k, v = pair.split("=", 2)
          return nil unless v&.match?(/\A-?\d{1,19}\z/)

          [k.to_sym, Integer(v, 10)]
        end
      end
    end
  end
end
