# frozen_string_literal: true

module Fathom
  class CLI
    # `fathom analyze`: offline ObjectSpace.dump_all analysis (Profilers::DumpAnalysis).
    # Unlike `report`, it loads the native extension (the reader is C++).
    module Analyze
      private

      def analyze_parser(opts)
        command_parser("Usage: fathom analyze [options] DUMP\n       fathom analyze --diff A B [C]", <<~ABOUT) do |o|
          Reads an ObjectSpace.dump_all file (JSON lines, plain or gzip), computes
          dominators and retained sizes, prints the retention report (as fathom report)
          and, when the dump has them, live bytes by allocation site and generation.
          --diff: the three-dump technique: objects in B (and still in C) not in A.
        ABOUT
          o.on("-o", "--out FILE", "write the retention profile (pprof, gzipped) to FILE") { |v| opts[:out] = v }
          o.on("--top N", "rows to show (default: 20)") { |v| opts[:top] = v }
          o.on("--diff", "compare 2 or 3 dumps taken in that order") { opts[:diff] = true }
          o.on("--strings", "duplicated strings instead: copies, bytes, where allocated (needs a dump with",
               "strings' values: ObjectSpace.dump_all's, or Fathom.heap_dump(path, values: true))") { opts[:strings] = true }
          o.on("--string-contents", "name strings by the start of their value (\"session-…\"); off by default: the " \
                                    "dump holds the program's data, the report and profile do not") { opts[:string_contents] = true }
          o.on("-h", "--help", "show this help") { opts[:help] = true }
        end
      end

      def analyze_command(argv)
        opts = {}
        return 0 if parse_or_help(analyze_parser(opts), argv, opts, order: false)

        top = top_option(opts)
        raise UsageError, "--strings reads one dump (not --diff)" if opts[:strings] && opts[:diff]
        return analyze_diff(argv, top, opts) if opts[:diff]
        raise UsageError, "missing DUMP" if argv.empty?
        raise UsageError, "too many arguments: #{printable(argv).join(" ")} (--diff compares dumps)" if argv.size > 1

        path = argv.first
        return analyze_strings(path, top, opts) if opts[:strings]

        out = opts[:out] && analyze_out(opts[:out])
        require_relative "../profilers/dump_analysis"
        text = with_data("analyze", path) do
          profile = Profilers::DumpAnalysis.analyze(path, top: top, string_contents: opts[:string_contents] == true)
          profile.write(out) if out
          [Report.for_bytes(profile.bytes, top: top).to_s, Profilers::DumpAnalysis.tables(profile.stats),
           out && "fathom: wrote retention profile to #{out}\n"].compact.join("\n")
        end
        return 1 unless text

        @stdout.print text
        0
      end

      def analyze_diff(argv, top, opts)
        raise UsageError, "--diff takes 2 or 3 dumps: A B [C]" unless (2..3).cover?(argv.size)
        raise UsageError, "--diff writes no profile (-o)" if opts[:out]

        require_relative "../profilers/dump_analysis"
        text = with_data("analyze", printable(argv).join(", ")) do
          Profilers::DumpAnalysis.diff_text(Profilers::DumpAnalysis.diff(argv, top: top, string_contents: opts[:string_contents] == true))
        end
        return 1 unless text

        @stdout.print text
        0
      end

      # The duplicated strings of one dump (pure Ruby: a pass over its
      # STRING lines, no native reader needed).
      def analyze_strings(path, top, opts)
        raise UsageError, "--strings prints a report; it writes no profile (-o)" if opts[:out]

        text = with_data("analyze", path) do
          Report::DuplicateStrings.from_dump(path, contents: opts[:string_contents] == true, top: top).to_s
        end
        return 1 unless text

        @stdout.print text
        0
      end

      def analyze_out(out)
        validate { Options.path("--out", out) }
        check_out_dir!(File.expand_path(out), "--out")
        Files::AtomicFile.check_target!(out)
        out
      rescue Fathom::Error => e
        raise UsageError, cli_message(e.message)
      end
    end
    include Analyze
  end
end
