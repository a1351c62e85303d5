# frozen_string_literal: true

require_relative "../options"
require_relative "../native"
require_relative "../profile"
require_relative "../report/units"

module Fathom
  module Profilers
    # Offline analysis of ObjectSpace.dump_all files (JSON lines, plain or
    # gzip): the retention profile of the in-process snapshot, built from the
    # dump's ROOT records and references by the C++ core without the GVL
    # (core/dump/), plus live bytes by allocation site and by generation when
    # the dump has them (ObjectSpace.trace_object_allocations was on).
    #
    #   profile = Fathom.analyze_dump("heap.json")
    #   puts profile.report                 # the same report as `fathom report`
    #   puts Fathom::Profilers::DumpAnalysis.tables(profile.stats)
    module DumpAnalysis
      # string_contents: name STRING objects by the start of their value
      # ("via Session \"pppp…\""). Off: a dump holds the program's data (API
      # keys, passwords), and a profile or report made from it must not carry
      # it further (docs/internals/dump.md, "Names a dump allows").
      DEFAULTS = { max_depth: 64, top: 20, progress: :auto, parser: :auto, string_contents: false }.freeze
      # :auto reads each line with Fathom's scanner for the dump_all shape and
      # hands a line it does not expect to simdjson's DOM parser; :dom gives
      # every line to the DOM parser (slower; for comparison and bench/dump.rb).
      PARSERS = { auto: 0, dom: 1 }.freeze
      MAX_DEPTH_RANGE = Options::RETENTION_DEPTH_RANGE
      TOP_RANGE = (1..100_000).freeze
      # Dumps smaller than this finish before a progress line would help.
      PROGRESS_MIN_BYTES = 4 << 20

      module_function

      # Returns a Fathom::Profile (kind :retention) whose stats also hold
      # :sites and :generations ([[key, objects, bytes], ...], nil when the
      # dump has none), :dangling_references, :peak_bytes (the analyzer's own
      # arrays at their peak), :phases_ns, :phases_cpu_ns (CPU time per
      # phase), :phases_hwm_bytes (the process's VmHWM after each phase),
      # :dom_lines (lines the scanner left to simdjson's DOM parser),
      # :string_prefixes and :named_string_prefixes (0 unless string_contents).
      # Raises Fathom::Error (with the line number) for a file that is not a
      # usable dump, ArgumentError/TypeError for bad options.
      def analyze(path, out: nil, **opts)
        Options.check_unknown!(opts, DEFAULTS.keys, "Fathom.analyze_dump")
        opts = DEFAULTS.merge(opts)
        path = Options.path("path", path)
        out = Options.path("out", out) unless NilClass === out
        max_depth = Options.integer("max_depth", opts[:max_depth], MAX_DEPTH_RANGE)
        top = Options.integer("top", opts[:top], TOP_RANGE)
        string_contents = Options.boolean("string_contents", opts[:string_contents])
        parser = PARSERS.fetch(opts[:parser]) do
          raise ArgumentError, "fathom: parser must be one of #{PARSERS.keys.map(&:inspect).join(", ")}, got #{Options.describe(opts[:parser])}"
        end
        require_reader!
        result = Native.analyze_dump(path, max_depth, top, progress_fd(opts[:progress], [path]), parser, string_contents)
        stats = result[:stats].merge(sites: result[:sites], generations: result[:generations], dump: path)
        profile = Profile.new(result[:profile], stats, kind: :retention)
        profile.write(out) if out
        profile
      end

      # The extension is built without the reader only when asked
      # (FATHOM_DUMP_READER=0, ext/fathom/extconf.rb): simdjson is vendored.
      def require_reader!
        NativeLoader.require!
        return if Native.respond_to?(:analyze_dump)

        raise Fathom::Error, "fathom: this build has no heap-dump reader: it was built with FATHOM_DUMP_READER=0 " \
                             "(reinstall fathom without it)"
      end

      # The three-dump technique (see DumpDiff in core/dump/dump_analysis.h):
      # objects of B (and still in C) that were not in A, by allocation site
      # (or class) and by dominator path. Returns a Hash.
      def diff(paths, top: 20, progress: :auto, string_contents: false)
        unless Array === paths && (2..3).cover?(paths.size)
          raise ArgumentError, "fathom: a dump diff takes 2 or 3 dumps (A B [C]), got #{Options.describe(paths)}"
        end

        paths = paths.map { |p| Options.path("path", p) }
        top = Options.integer("top", top, TOP_RANGE)
        string_contents = Options.boolean("string_contents", string_contents)
        require_reader!
        Native.diff_dumps(paths, top, progress_fd(progress, paths), string_contents).merge(dumps: paths)
      end

      # :auto: stderr when it is a terminal and a dump is big enough.
      def progress_fd(progress, paths)
        case progress
        when nil, false then -1
        when :auto, true
          return -1 unless $stderr.respond_to?(:tty?) && $stderr.tty? && $stderr.respond_to?(:fileno)
          return -1 unless progress == true || paths.any? { |p| File.size?(p).to_i >= PROGRESS_MIN_BYTES }

          $stderr.fileno
        else raise ArgumentError, "fathom: progress must be :auto, true, false or nil, got #{Options.describe(progress)}"
        end
      rescue IOError, SystemCallError
        -1
      end

      # The dump-only part of the report: what the dump could not name,
      # dangling references, sites and generations.
      def tables(stats)
        mb = ->(b) { Report::Units.format_value(b, "bytes") }
        lines = []
        lines << "Dump: #{stats[:objects]} objects, #{mb.(stats[:bytes])}; reachable from roots: " \
                 "#{stats[:reachable_objects]} objects, #{mb.(stats[:reachable_bytes])}"
        lines << "Unreachable (garbage not yet collected): #{stats[:unreachable_objects]} objects" if stats[:unreachable_objects].to_i.positive?
        if stats[:dangling_references].to_i.positive?
          lines << "Dangling references (to addresses not in the dump): #{stats[:dangling_references]}"
        end
        lines << "Names unavailable in a heap dump: #{stats[:unavailable_names]}"
        if stats[:string_contents] == false
          lines << "Strings are not named by their value (the dump's data stays out of this report; --string-contents names them)"
        end
        if stats[:string_prefixes].to_i > stats[:named_string_prefixes].to_i
          lines << "Strings are named by the start of their value (up to the first digit): the " \
                   "#{stats[:named_string_prefixes]} most common of #{stats[:string_prefixes]} distinct prefixes; " \
                   "other strings by their referrer only"
        end
        lines.concat(table("Live by allocation site", stats[:sites], mb))
        if stats[:sites].nil?
          lines << "" << "No allocation sites or generations: the dump was taken without ObjectSpace.trace_object_allocations."
        end
        lines.concat(table("Live by generation (GC count at allocation)", stats[:generations], mb, "generation")) if stats[:generations]
        lines.join("\n") + "\n"
      end

      def diff_text(diff)
        mb = ->(b) { Report::Units.format_value(b, "bytes") }
        a, b, c = diff[:dumps]
        lines = ["Objects in #{b}#{" and still in #{c}" if c} that were not in #{a}: " \
                 "#{diff[:new_objects]} objects, #{mb.(diff[:new_bytes])}"]
        lines << "(matched by address only: the dumps have no generations)" unless diff[:has_generations]
        if diff[:new_objects].zero?
          lines << "Nothing new survived: no leak between these dumps."
          return lines.join("\n") + "\n"
        end
        lines.concat(table(diff[:has_sites] ? "New by allocation site" : "New by class", diff[:by_site], mb))
        lines.concat(table("New by dominator path (what holds them)", diff[:by_path], mb))
        lines.join("\n") + "\n"
      end

      def table(title, rows, mb, what = "where")
        return [] if rows.nil? || rows.empty?

        out = ["", title + ":", format("%12s %10s  %s", "bytes", "objects", what)]
        rows.each { |key, objects, bytes| out << format("%12s %10d  %s", mb.(bytes), objects, Options.clean(key, 300)) }
        out
      end
    end
  end

  def self.analyze_dump(path, **opts)
    Profilers::DumpAnalysis.analyze(path, **opts)
  end
end
