# frozen_string_literal: true

module Fathom
  class CLI
    # `fathom report FILE` and `fathom merge FILE... -o OUT`: pure Ruby, no
    # native extension (the reports read the decoded pprof, Report::*).
    module ReportCommand
      FORMATS = %w[text html pprof].freeze

      private

      def report_parser(opts)
        command_parser("Usage: fathom report [options] FILE", <<~ABOUT) do |o|
          Heap profiles: the sites with the largest values (the innermost Ruby line of each
          stack; C methods such as String#* folded into the line that called them), with
          flat (the site itself) and cum (everything below it), like `go tool pprof -top`.
          CPU/wall profiles (pprof or Firefox JSON, also combined with gc and heap): the top
          functions, the top allocating ones (combined with heap) and a row per thread.
          Retention profiles: the top retainers with their reference chain.
          GC profiles (pprof or Firefox JSON): GC counts, time in GC, pause percentiles.
        ABOUT
          o.on("--sample-index NAME", "alloc_objects, alloc_space, inuse_objects or inuse_space",
               "(default: the profile's default, inuse_space); for a GC",
               "profile the column its table is sorted by: wall, cpu, gc_steps, gcs",
               "(a --gc-source counters profile has cpu and gcs only);",
               "for a CPU/wall profile the functions' measure: cpu, wall, samples") { |v| opts[:sample_index] = v }
          o.on("--top N", "rows to show (default: 20; more than the report has: all)") { |v| opts[:top] = v }
          o.on("--by ROWS", "what a row is: site, line (with its source), file, gem (a gem, a stdlib",
               "library, or app), class, function (default: site for heap profiles, function",
               "for CPU/wall; for retention profiles gem or class, else the retainers)") { |v| opts[:by] = v }
          o.on("--sort ORDER", "flat (default) or cum") { |v| opts[:sort] = v }
          o.on("--focus PATTERN", "keep the samples with a frame whose name or file matches (a Ruby regexp)") { |v| opts[:focus] = v }
          o.on("--ignore PATTERN", "drop the samples with a frame whose name or file matches") { |v| opts[:ignore] = v }
          o.on("--hide PATTERN", "take matching frames out of every stack, their values to their callers",
               "(--hide /gems/: a gem's allocations charged to your line that called it)") { |v| opts[:hide] = v }
          o.on("--thread NAME", "one thread's samples (its name or id)") { |v| opts[:thread] = v }
          o.on("--hide-gc", "CPU/wall: leave out the samples taken in GC") { opts[:hide_gc] = true }
          o.on("--method NAME", "one method: callers, callees and its source with a value per line") { |v| opts[:method] = v }
          o.on("--strings", "retention profiles: duplicated strings (copies, bytes, where allocated)") { opts[:strings] = true }
          o.on("--notes", "print the profile's own comments and how its values were estimated") { opts[:notes] = true }
          o.on("--format FORMAT", "text (default), html (a flame graph in one file, nothing fetched),",
               "pprof (the profile as filtered, gzipped)") { |v| opts[:format] = v }
          o.on("-o", "--out FILE", "write the html or pprof output to FILE (default for html: stdout)") { |v| opts[:out] = v }
          o.on("--force", "replace an existing FILE that Fathom did not write (never a link or a device)") { opts[:force] = true }
          o.on("-h", "--help", "show this help") { opts[:help] = true }
        end
      end

      def report_command(argv)
        opts = {}
        return 0 if parse_or_help(report_parser(opts), argv, opts, order: false)

        raise UsageError, "missing FILE" if argv.empty?
        raise UsageError, "too many arguments: #{printable(argv).join(" ")}" if argv.size > 1

        top = top_option(opts)
        format = opts.fetch(:format, "text")
        raise UsageError, "--format must be one of #{FORMATS.join(", ")}, got #{format.inspect}" unless FORMATS.include?(format)
        raise UsageError, "--format pprof needs -o/--out FILE (the profile is gzipped binary)" if format == "pprof" && !opts[:out]
        raise UsageError, "-o/--out is for --format html or pprof (the text report goes to stdout)" if opts[:out] && format == "text"
        if opts[:method] && opts[:strings]
          raise UsageError, "--method and --strings are two reports: give one"
        end
        if (opts[:method] || opts[:strings]) && format != "text"
          raise UsageError, "#{opts[:method] ? "--method" : "--strings"} is a text report (no --format #{format})"
        end

        view = validate do
          Report::View.new(by: opts[:by], sort: opts[:sort], focus: opts[:focus], ignore: opts[:ignore], hide: opts[:hide],
                           thread: opts[:thread], hide_gc: opts[:hide_gc] == true, notes: opts[:notes] == true, cli: true)
        end
        out = opts[:out] && checked_out(opts[:out], opts[:force])
        path = argv.first
        bytes = read_profile("report", path) or return 1
        result = with_data("report", path) do
          report_output(bytes, path, format, view, sample_index: opts[:sample_index], top: top, method: opts[:method],
                                                   strings: opts[:strings])
        end
        return 1 unless result

        if out
          Files::AtomicFile.write(out, result, overwrite: opts[:force] == true)
          @stderr.puts "fathom: wrote #{format == "html" ? "flame graph" : "profile"} to #{out}"
        else
          @stdout.print result
        end
        0
      rescue Fathom::Error => e
        data_error("report", opts[:out].to_s, e.message)
      end

      def report_output(bytes, path, format, view, sample_index:, top:, method:, strings:)
        if Report.firefox_json?(bytes)
          raise Fathom::Error, "fathom: a Firefox Profiler file: --method reads pprof profiles" if method
          raise Fathom::Error, "fathom: a Firefox Profiler file: --strings reads retention profiles" if strings
          raise Fathom::Error, "fathom: a Firefox Profiler file: --format pprof re-encodes pprof profiles" if format == "pprof"
          return Report.for_bytes(bytes, sample_index: sample_index, top: top, view: view).to_s if format == "text"

          return flame(Report.firefox_cpu_profile(bytes), path, view, sample_index)
        end

        profile = Report.decode(bytes)
        kind = Report.kind(profile)
        return Report::DuplicateStrings.from_profile(profile, top: top).to_s if strings
        return Report.for_profile(profile, sample_index: sample_index, top: top, view: view).to_s if format == "text" && !method

        view.check_for!(kind, profile)
        filtered = view.apply(profile)
        return Report::MethodView.new(filtered, method, sample_index: sample_index, option: "--method").to_s if method
        return flame(filtered, path, view, sample_index, kind) if format == "html"

        Pprof::Writer.gzip(filtered)
      end

      def flame(profile, path, view, sample_index, kind = :cpu)
        if kind == :gc
          raise ArgumentError, "fathom: --format html draws stacks; a GC profile is a summary of GC periods (its Firefox " \
                               "file shows them on a timeline)"
        end

        notes = view.filtered? ? ["Filtered: #{view.filters_text}"] : []
        Report::FlameHtml.new(profile, title: File.basename(path.to_s), sample_index: sample_index, notes: notes).to_s
      end

      # An output path that may be written: its directory exists (a typo
      # must not create directories: `-o /nonexistnt/x.pb.gz`), and
      # Files::AtomicFile's rules (no links or devices; a file Fathom did not
      # write only with --force). Returns the absolute path.
      def checked_out(out, force, option = "-o/--out")
        out = File.expand_path(validate { Options.path(option, out) })
        check_out_dir!(out, option)
        Files::AtomicFile.check_target!(out, overwrite: force == true)
      rescue Fathom::Error => e
        raise UsageError, cli_message(e.message)
      end

      def check_out_dir!(path, option = "-o/--out")
        dir = File.dirname(path)
        return if File.directory?(dir)

        what = File.exist?(dir) ? "is not a directory" : "does not exist"
        raise UsageError, "#{option} #{Options.clean(path, 200)}: the directory #{Options.clean(dir, 200)} #{what} " \
                          "(Fathom creates no directories for an output file; create it first)"
      end

      # Files::AtomicFile speaks to the Ruby API ("pass overwrite: true / --force");
      # on the command line the option is --force.
      def cli_message(message)
        message.delete_prefix("fathom: ").sub("pass overwrite: true / --force", "pass --force")
      end

      # ---- fathom merge --------------------------------------------------

      def merge_parser(opts)
        command_parser("Usage: fathom merge [options] FILE FILE... -o OUT", <<~ABOUT) do |o|
          Adds pprof profiles of one kind into one: every worker's heap file of one
          minute, the CPU profiles of several runs. Stacks and labels are kept; the
          result covers the earliest start to the latest end. Profiles of different kinds
          (heap and CPU, CPU and wall) or with different sample types are refused.
        ABOUT
          o.on("-o", "--out FILE", "where to write the merged profile (gzipped pprof)") { |v| opts[:out] = v }
          o.on("--force", "replace an existing FILE that Fathom did not write (never a link or a device)") { opts[:force] = true }
          o.on("-h", "--help", "show this help") { opts[:help] = true }
        end
      end

      def merge_command(argv)
        opts = {}
        return 0 if parse_or_help(merge_parser(opts), argv, opts, order: false)
        raise UsageError, "missing -o OUT (where to write the merged profile)" unless opts[:out]
        raise UsageError, "need two or more profiles to merge, got #{argv.size}" if argv.size < 2

        out_path = File.expand_path(validate { Options.path("-o/--out", opts[:out]) })
        # An input that names no usable path ("~nosuchuser/x") cannot be the
        # output; reading it below says why it fails.
        if (same = argv.find { |p| expanded(p) == out_path })
          raise UsageError, "-o/--out #{Options.clean(same, 200)} is one of the profiles to merge; write the merge to a new file"
        end
        out = checked_out(opts[:out], opts[:force])

        profiles = argv.map do |path|
          bytes = read_profile("merge", path) or return 1
          profile = with_data("merge", path) do
            if Report.firefox_json?(bytes)
              raise Fathom::Error, "fathom: a Firefox Profiler file; fathom merge adds pprof profiles"
            end

            Report.decode(bytes)
          end or return 1
          [path, profile]
        end
        merged = with_data("merge", printable(argv).join(", ")) { Report::Merge.new(profiles) } or return 1
        Files::AtomicFile.write(out, Pprof::Writer.gzip(merged.profile), overwrite: opts[:force] == true)
        @stdout.puts "fathom: merged #{profiles.size} #{merged.kind} profiles (#{merged.profile.samples.size} " \
                     "distinct stacks) into #{out}"
        0
      rescue Fathom::Error => e
        data_error("merge", opts[:out].to_s, e.message)
      end
    end
    include ReportCommand
  end
end
