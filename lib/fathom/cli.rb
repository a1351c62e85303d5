# frozen_string_literal: true

require "optparse"
require_relative "version"
require_relative "error"
require_relative "options"
require_relative "files/profile_bytes"
require_relative "pprof/reader"
require_relative "report/top"
require_relative "report"
require_relative "files/output_paths"
require_relative "modes"
require_relative "files/atomic_file"
require_relative "cli/analyze"
require_relative "cli/dump"
require_relative "cli/report"
require_relative "cli/leaks"
require_relative "files/stdlib"

module Fathom
  # The `fathom` command. Deliberately does not load the native extension:
  # `run` only prepares the environment and execs, `report` is pure Ruby.
  #
  # Exit statuses (EXIT_STATUSES, also in the help):
  #   0  success
  #   1  the command ran and failed: a file that cannot be read or is not a
  #      usable profile (empty, truncated, corrupt, too large), two profiles
  #      that cannot be compared; for `dump`, a fetch the server refused or
  #      that failed. One line on stderr: "fathom CMD: FILE: why" (the URL
  #      for `dump`).
  #   2  bad usage: the command line is wrong (unknown command or option, a
  #      missing or extra argument, a value out of range, a --sample-index
  #      the profile does not have, an output path that may not be written).
  #      The message, then "Run `fathom CMD --help` for usage."
  #   3  `fathom leaks` found a leak (or growth outside Ruby objects)
  # `run` exits with the profiled command's status (127 when it cannot be
  # found, 126 when it cannot be executed).
  #
  # Bad data never reaches the usage path: the readers and reports raise
  # Fathom::Error for it, and only ArgumentError/TypeError (an option's
  # fault) become usage errors.
  class CLI
    class UsageError < StandardError; end

    LIB_DIR = File.expand_path("..", __dir__)
    MODES = Modes::ALL.map(&:to_s).freeze
    FORMATS = Modes::ALL_FORMATS.map(&:to_s).freeze
    HEAP = Modes::DEFAULTS.fetch(:heap)
    GC = Modes::DEFAULTS.fetch(:gc)

    HELP = <<~TEXT
      Usage: fathom COMMAND [options]

      Commands:
        run     run a Ruby program under the profiler and write a profile
        report  print a profile's report (no Go needed): by site, line, file, gem or class;
                filters, --method, --strings, --format html (a flame graph in one file)
        diff    what grew between two profiles, per path (find a leak from two snapshots)
        merge   add profiles of one kind into one (every worker's file of one minute)
        leaks   which sites grow over a series of heap profiles, what holds them, how sure
        analyze an ObjectSpace.dump_all file: retention report, sites; --diff A B [C]
        dump    fetch a heap dump (dump_all format) from a server's /debug/fathom/dump

      Options:
        -h, --help     show this help (`fathom COMMAND --help` for a command's)
        -v, --version  show the version

      Exit status:
        0  success
        1  a file cannot be read or is not a usable profile, or profiles cannot be compared
        2  bad usage: unknown option, missing argument, value out of range
        3  fathom leaks: a leak was found (or growth outside Ruby objects)
        fathom run exits with the status of the program it runs; fathom dump exits 1 when
        the server refuses the dump or the fetch fails.

      Examples:
        fathom run --mode heap -o heap.pb.gz -- ruby script.rb
        fathom report heap.pb.gz --sample-index alloc_space --top 10
        fathom report heap.pb.gz --by line --hide /gems/
        fathom report heap.pb.gz --method 'Importer#run'
        fathom report cpu.pb.gz --format html -o flame.html
        fathom merge worker-*.heap.pb.gz -o all.heap.pb.gz
        fathom run --mode gc --format firefox -o gc.json.gz -- ruby script.rb
        fathom run --mode retention -o retained.pb.gz -- ruby script.rb
        fathom run --mode wall,gc -o run -- ruby script.rb   # every thread's time, with GC
        fathom diff before.pb.gz after.pb.gz
        fathom leaks /var/tmp/fathom                            # always-on files: FATHOM_DIR
        fathom leaks http://127.0.0.1:3000/debug/fathom --every 30s --for 20m
        fathom analyze heap.json -o retained.pb.gz
        fathom dump http://127.0.0.1:3000/debug/fathom -o heap.json.gz && fathom analyze heap.json.gz
        go tool pprof -http=: heap.pb.gz
    TEXT

    def self.start(argv = ARGV)
      exit new.run(argv.dup)
    end

    def initialize(stdout: $stdout, stderr: $stderr)
      @stdout = stdout
      @stderr = stderr
    end

    # Returns the exit status (`run` does not return when exec succeeds).
    def run(argv)
      argv = argv.map { |arg| binary_if_invalid(arg) }
      command = argv.shift
      case command
      when nil
        @stderr.print HELP
        2
      when "-h", "--help", "help"
        help(argv.first)
      when "-v", "--version", "version"
        @stdout.puts "fathom #{VERSION}"
        0
      when "run" then run_command(argv)
      when "report" then report_command(argv)
      when "diff" then diff_command(argv)
      when "analyze" then analyze_command(argv)
      when "dump" then dump_command(argv)
      when "merge" then merge_command(argv)
      when "leaks" then leaks_command(argv)
      else usage_error(nil, "unknown command #{command.inspect} (commands: #{COMMANDS.join(", ")})")
      end
    rescue UsageError => e
      usage_error(command, e.message)
    end

    private

    def help(command)
      case command
      when nil then @stdout.print HELP
      when "run" then @stdout.puts run_parser({})
      when "report" then @stdout.puts report_parser({})
      when "diff" then @stdout.puts diff_parser({})
      when "analyze" then @stdout.puts analyze_parser({})
      when "dump" then @stdout.puts dump_parser({})
      when "merge" then @stdout.puts merge_parser({})
      when "leaks" then @stdout.puts leaks_parser({})
      else return usage_error(nil, "unknown command #{command.inspect} (commands: #{COMMANDS.join(", ")})")
      end
      0
    end

    COMMANDS = %w[run report diff merge analyze dump leaks].freeze

    def usage_error(command, message)
      where = command && COMMANDS.include?(command) ? "fathom #{command}" : "fathom"
      @stderr.puts "#{where}: #{Options.clean(message, 500)}"
      @stderr.puts "Run `#{where} --help` for usage."
      2
    end

    # Exit status 1: the data's fault, on one line.
    def data_error(command, path, message)
      message = message.delete_prefix("fathom: ")
      @stderr.puts "fathom #{command}: #{Options.clean(path, 200)}: #{Options.clean(message, 500)}"
      1
    end

    # Arguments for a message: joining a binary one (see binary_if_invalid)
    # with a UTF-8 one would raise Encoding::CompatibilityError.
    def printable(args)
      args.map { |arg| Options.clean(arg, 200) }
    end

    # OptionParser matches every argument with regexps, which raise
    # ArgumentError on a String with invalid UTF-8 (a file name is any bytes).
    # As binary such an argument keeps its bytes and parses.
    def binary_if_invalid(arg)
      String === arg && !arg.valid_encoding? ? arg.b : arg
    end

    # Options must be spelled in full. OptionParser would otherwise complete
    # any unique prefix, case-insensitively (`--T 5` meant --top 5), and an
    # abbreviation that works today breaks silently when a later release adds
    # an option sharing its prefix, in a script nobody rereads.
    # OptionParser#require_exact= cannot do this on Ruby 3.1 (optparse 0.2.0):
    # it rejects --out=FILE and crashes on `-o FILE`. Completion goes through
    # OptionParser#complete, so an exact lookup there is the whole rule.
    module ExactOptions
      private

      def complete(typ, opt, icase = false, *pat)
        return super unless pat.empty?

        search(typ, opt) { |switch| return [switch, opt] }
        raise OptionParser::InvalidOption, opt
      end
    end

    # OptionParser's own errors (unknown option, missing argument) become usage errors.
    # Parses argv with a command's parser; prints its help and returns true
    # when --help was given.
    # A command's parser: its usage line, what it does (`about`, a heredoc,
    # shown between blank lines), then the options the block adds.
    def command_parser(usage, about)
      OptionParser.new do |o|
        o.banner = usage
        o.separator ""
        about.each_line { |line| o.separator(line.chomp) }
        o.separator ""
        yield o
      end
    end

    def parse_or_help(parser, argv, opts, order:)
      parse(parser, argv, order: order)
      @stdout.puts parser if opts[:help]
      opts[:help]
    end

    def parse(parser, argv, order:)
      without_officious_options(parser)
      parser.extend(ExactOptions)
      order ? parser.order!(argv) : parser.permute!(argv)
    rescue OptionParser::ParseError => e
      raise UsageError, e.message
    end

    # OptionParser answers --version, --*-completion-bash and
    # --*-completion-zsh (and abbreviations: `fathom diff --v`) itself, by
    # printing and calling exit: an unknown option for fathom's commands.
    def without_officious_options(parser)
      parser.base.long.delete_if { |name, _| name != "help" }
    end

    # Converts an Options validation error into a usage error.
    def validate
      yield
    rescue ArgumentError, TypeError => e
      raise UsageError, e.message.delete_prefix("fathom: ")
    end

    # ---- fathom run ----------------------------------------------------

    def run_parser(opts)
      command_parser("Usage: fathom run [options] [--] COMMAND [ARGS...]", <<~ABOUT) do |o|
        Runs COMMAND (normally `ruby ...`) with the profiler loaded and writes a
        profile when it exits. Only that process and its forked children are
        profiled; a forked child writes FILE with its pid inserted (heap.<pid>.pb.gz).
        The exit status is COMMAND's.

        Modes combine (--mode heap,gc): each writes its own file, FILE without its
        extension plus .<mode>.pb.gz (-o run -> run.heap.pb.gz, run.gc.pb.gz).
        retention takes a snapshot at exit, after the program's own at_exit handlers.
      ABOUT
        o.on("--mode MODES", "what to profile, comma-separated: #{MODES.join(", ")} (default: #{Modes::DEFAULT})") { |v| opts[:mode] = v }
        o.on("--format FORMAT", "gc, cpu and wall profile format: pprof or firefox (Firefox Profiler JSON; with two or more of " \
                               "cpu/wall, gc, heap: one file for them; default: #{GC[:format]})") { |v| opts[:format] = v }
        o.on("--coalesce DUR", "GC: sum GC steps into one sample at most this often, up to " \
                               "#{Options.format_ns(Options::COALESCE_NS.end)}; 0 = every step " \
                               "(default: #{Modes.format_seconds(GC[:coalesce])})") { |v| opts[:coalesce] = v }
        o.on("--gc-source SOURCE", "GC: where GC data comes from: #{Modes::GC_SOURCES.join(", ")} (default: auto = " \
                                   "counters on Ruby < 3.3, where GC hooks slow every allocation; hooks on 3.3+). " \
                                   "hooks gives per-pause times") { |v| opts[:gc_source] = v }
        o.on("--exact", "record every allocation instead of sampling (slow)") { opts[:exact] = true }
        o.on("--no-census", "heap: keep the sampled estimate of live bytes, without calibrating it to a walk of the " \
                            "heap at the flush (which costs ~10 ms per 250k live objects)") { opts[:census] = false }
        o.on("--native", "with --mode cpu or wall: C frames (libz's deflate, rb_hash_aref) under the Ruby frames " \
                         "that called them") { opts[:native] = true }
        o.on("--string-contents", "with --mode retention: name String hash keys by their bytes ({\"sk_live_…\"}), not " \
                                  "their shape ({\"…\" 32 bytes #8bcd}), and keep duplicated strings' contents " \
                                  "(fathom report --strings); for local debugging: the file then holds " \
                                  "the program's data") { opts[:string_contents] = true }
        o.on("--interval DUR", "sampling interval, e.g. 1ms, 10ms, 0.002; " \
                               "#{Options.format_ns(Options::SAMPLING_INTERVAL_NS.begin)}..#{Options.format_ns(Options::SAMPLING_INTERVAL_NS.end)} " \
                               "(default: #{Modes.format_seconds(HEAP[:interval])})") { |v| opts[:interval] = v }
        o.on("--max-depth N", "deepest stack recorded, #{Options::MAX_DEPTH_RANGE} (default: #{HEAP[:max_depth]})") { |v| opts[:max_depth] = v }
        o.on("-o", "--out FILE", "where to write the profile (default: fathom-<mode>.pb.gz; a .json.gz name is " \
                                 "--format firefox); its directory must exist") { |v| opts[:out] = v }
        o.on("--force", "replace an existing FILE that Fathom did not write (never a link or a device)") { opts[:force] = true }
        o.on("-h", "--help", "show this help") { opts[:help] = true }
      end
    end

    def run_command(argv)
      opts = {}
      return 0 if parse_or_help(run_parser(opts), argv, opts, order: true)

      raise UsageError, "missing COMMAND to run (e.g. fathom run -- ruby script.rb)" if argv.empty?

      env = run_env(opts)
      exec_command(env, argv)
    end

    # The environment that lib/fathom/autorun.rb reads in the profiled program.
    # Everything is checked here, before the program runs: a bad option or an
    # output file that may not be written must not cost the user a whole run.
    def run_env(opts)
      modes = begin
        Modes.parse(opts.fetch(:mode, Modes::DEFAULT.to_s), "--mode")
      rescue ArgumentError, TypeError => e
        # cpu and wall are both modes, but not together: say that rule.
        raise UsageError, e.message.delete_prefix("fathom: ") if e.message.include?("cannot be profiled together")

        raise UsageError, "--mode must be one or more of #{MODES.join(", ")}, got #{opts[:mode].inspect}"
      end
      format = opts.fetch(:format) { format_from_out(opts[:out], modes) || GC[:format].to_s }
      raise UsageError, "--format must be one of #{FORMATS.join(", ")}, got #{format.inspect}" unless FORMATS.include?(format)

      validate { Modes.check_format!(modes, format, "--format") }
      coalesce = opts.fetch(:coalesce, Modes.format_seconds(GC[:coalesce]))
      # The same bounds as GcProfiler's coalesce: a value it would refuse
      # must fail here, not leave the program unprofiled after it started.
      unless coalesce.strip == "0"
        validate { Options.duration_ns("--coalesce", coalesce, min_ns: Options::COALESCE_NS.begin, max_ns: Options::COALESCE_NS.end) }
      end

      gc_source = opts.fetch(:gc_source, GC[:gc_source].to_s)
      unless Modes::GC_SOURCES.map(&:to_s).include?(gc_source)
        raise UsageError, "--gc-source must be one of #{Modes::GC_SOURCES.join(", ")}, got #{gc_source.inspect}"
      end
      if gc_source == "counters" && coalesce.strip == "0"
        raise UsageError, "--coalesce 0 (one period per GC step) needs --gc-source hooks"
      end

      if opts[:native] && !modes.intersect?(Modes::CPU_MODES)
        raise UsageError, "--native needs --mode cpu or wall (C frames are sampled with the CPU profiler)"
      end

      if opts[:string_contents] && !modes.include?(:retention)
        raise UsageError, "--string-contents needs --mode retention (only retention profiles name hash keys)"
      end

      interval_ns = validate do
        Options.sampling_interval_ns("--interval", opts.fetch(:interval, Modes.format_seconds(HEAP[:interval])))
      end
      max_depth = validate { Options.parse_integer("--max-depth", opts.fetch(:max_depth, HEAP[:max_depth].to_s), Options::MAX_DEPTH_RANGE) }
      # One mode: the file (default fathom-<mode>.pb.gz); several: a base name.
      out = opts[:out] || (Files::OutputPaths.default(modes.first, format) if modes.size == 1)
      out &&= File.expand_path(validate { Options.path("--out", out) })
      raise UsageError, "--out #{out} is a directory; give a file name" if out && File.directory?(out)
      check_outputs(modes, out, format, opts[:force])
      # RUBYOPT is split on whitespace with no quoting, so -I cannot carry such a path.
      raise UsageError, "cannot run from #{LIB_DIR}: RUBYOPT cannot hold a path with spaces" if LIB_DIR.match?(/\s/)

      {
        "FATHOM_MODE" => modes.join(","),
        "FATHOM_OUT" => out || "",
        "FATHOM_FORCE" => opts[:force] ? "1" : "0",
        "FATHOM_FORMAT" => format,
        "FATHOM_COALESCE" => coalesce,
        "FATHOM_GC_SOURCE" => gc_source,
        "FATHOM_EXACT" => opts[:exact] ? "1" : "0",
        "FATHOM_CENSUS" => opts[:census] == false ? "0" : "1",
        "FATHOM_NATIVE" => opts[:native] ? "1" : "0",
        "FATHOM_STRING_CONTENTS" => opts[:string_contents] ? "1" : "0",
        "FATHOM_INTERVAL" => "#{interval_ns}ns",
        "FATHOM_MAX_DEPTH" => max_depth.to_s,
        # exec keeps our pid: autorun profiles the process whose pid this is.
        "FATHOM_PID" => Process.pid.to_s,
        "RUBYOPT" => ["-I#{LIB_DIR}", "-rfathom/autorun", ENV["RUBYOPT"]].compact.join(" ").strip,
      }
    end

    JSON_NAME = /\.json(\.gz)?\z/.freeze
    PPROF_NAME = /\.(pb\.gz|pb|pprof)\z/.freeze

    # Without --format, `-o cpu.json.gz` asks for a Firefox Profiler file
    # when a mode given can write one: the name says what the file is. nil
    # otherwise (the default, pprof).
    def format_from_out(out, modes)
      return nil unless out && JSON_NAME.match?(out.to_s)
      return nil unless modes.any? { |m| Modes::FORMATS.fetch(m).include?(:firefox) }

      "firefox"
    end

    # Every file the run will write may be written (Files::AtomicFile's rules),
    # into a directory that exists, under a name that says its format:
    # refused now, not after the program has run to its end.
    def check_outputs(modes, out, format, force)
      combined = Files::OutputPaths.combined_modes(modes, format)
      Files::OutputPaths.for_modes(out, modes, format: format).each do |mode, path|
        check_out_dir!(path, "--out")
        # The modes one Firefox file holds (the heap's allocations too) are written as it is.
        written = if combined.include?(mode) then :firefox
                  elsif Modes::FORMATS.fetch(mode).include?(format.to_sym) then format.to_sym
                  else :pprof
                  end
        check_format_name!(mode, path, written)
        Files::AtomicFile.check_target!(path, overwrite: force == true)
      end
    rescue Fathom::Error => e
      raise UsageError, cli_message(e.message)
    end

    # A .json(.gz) file holds JSON and a .pb.gz file pprof: a name that
    # says the other format is refused rather than written.
    def check_format_name!(mode, path, written)
      name = File.basename(path)
      if written == :pprof && JSON_NAME.match?(name)
        fix = Modes::FORMATS.fetch(mode).include?(:firefox) ? "--format firefox, or " : ""
        raise UsageError, "--out #{Options.clean(name, 100)}: a .json name, but the #{mode} profile is written as pprof " \
                          "(#{fix}a .pb.gz name)"
      elsif written == :firefox && PPROF_NAME.match?(name)
        raise UsageError, "--out #{Options.clean(name, 100)}: a pprof name, but --format firefox writes Firefox " \
                          "Profiler JSON (a .json.gz name, or --format pprof)"
      end
    end

    def exec_command(env, argv)
      # [cmd, cmd] form: never through a shell, even for a single argument.
      Kernel.exec(env, [argv[0], argv[0]], *argv[1..])
    rescue Errno::ENOENT
      hint = " (to run a Ruby file: fathom run -- ruby #{argv.join(" ")})" if argv[0].to_s.end_with?(".rb") || File.file?(argv[0].to_s)
      @stderr.puts "fathom run: command not found: #{argv[0]}#{hint}"
      127
    rescue SystemCallError => e
      @stderr.puts "fathom run: cannot execute #{argv[0]}: #{e.message}"
      126
    end

    # ---- fathom report, fathom merge: cli/report.rb ---------------------

    # --top: any positive integer; more rows than a report has shows them all.
    def top_option(opts)
      validate { Options.parse_integer("--top", opts.fetch(:top, "20"), 1..) }
    end

    # A connection for a remote read (fathom dump URL, fathom leaks URL):
    # TLS for https, and one request for each one asked. Net::HTTP resends
    # a GET that timed out, once, by itself (max_retries 1): a dump that
    # outlasted --timeout was asked for again of an app still writing the
    # first, which answered the second with 429 ("another retention
    # profiling request is running"), and the user saw that in place of the
    # timeout, after twice the wait and twice the work for the app.
    def remote_http(uri, open_timeout:, read_timeout:)
      require "net/http"
      http = Net::HTTP.new(uri.host, uri.port)
      http.use_ssl = uri.scheme == "https"
      http.open_timeout = open_timeout
      http.read_timeout = read_timeout
      http.max_retries = 0
      http
    end

    # `path` made absolute, or nil for a path that names none: File.expand_path
    # raises on "~user" of no such user and on bytes invalid in its encoding.
    def expanded(path)
      File.expand_path(path)
    rescue ArgumentError, EncodingError
      nil
    end

    # A profile file's bytes, or nil after saying why it cannot be read
    # (missing, unreadable, a directory or device, over Files::ProfileBytes' limit).
    def read_profile(command, path)
      bytes = Files::ProfileBytes.read_file(path)
      return bytes unless bytes.empty?

      data_error(command, path, "the file is empty (0 bytes), not a profile")
      nil
    rescue SystemCallError => e
      data_error(command, path, "cannot read it: #{e.message.scrub.sub(/ @ \w+ - .*\z/, "")}")
      nil
    rescue Fathom::Error => e
      data_error(command, path, e.message)
      nil
    end

    # Runs the block on a file's data: Fathom::Error (the data is not a
    # usable profile) is reported with the path and gives nil (exit 1);
    # ArgumentError/TypeError (an option does not fit the profile, like an
    # unknown --sample-index) become usage errors (exit 2).
    def with_data(command, path, &block)
      validate(&block)
    rescue Fathom::Error => e
      data_error(command, path, e.message)
      nil
    end

    # ---- fathom diff ---------------------------------------------------

    def diff_parser(opts)
      command_parser("Usage: fathom diff [options] BEFORE AFTER", <<~ABOUT) do |o|
        Growth per path between two pprof profiles of the same kind. For retention
        profiles a path is the reference chain that keeps objects alive, so two
        snapshots taken a while apart show what leaks and through which chain.
        For heap profiles a path is an allocation stack.
      ABOUT
        o.on("--sample-index NAME", "the value to compare (default: the profiles' default, inuse_space)") { |v| opts[:sample_index] = v }
        o.on("--top N", "rows to show (default: 20; more than the report has: all)") { |v| opts[:top] = v }
        o.on("-h", "--help", "show this help") { opts[:help] = true }
      end
    end

    def diff_command(argv)
      opts = {}
      return 0 if parse_or_help(diff_parser(opts), argv, opts, order: false)
      raise UsageError, "need two profiles: BEFORE AFTER" unless argv.size == 2

      top = top_option(opts)
      before, after = argv.map do |path|
        bytes = read_profile("diff", path) or return 1
        with_data("diff", path) { diff_side(bytes) } or return 1
      end
      # Neither file alone is at fault when they do not match: both are named.
      text = with_data("diff", printable(argv).join(" and ")) do
        Report::Diff.new(before, after, sample_index: opts[:sample_index], top: top).to_s
      end
      return 1 unless text

      @stdout.print text
      0
    end

    def diff_side(bytes)
      if Report.firefox_json?(bytes)
        raise Fathom::Error, "fathom: a Firefox Profiler file; fathom diff compares pprof profiles"
      end

      Report.decode(bytes)
    end
  end
end
