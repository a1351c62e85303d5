# frozen_string_literal: true

require "test_helper"
require "support/fuzz"
require "support/cli_runner"

# `fathom` with random command lines, in this process (support/cli_runner:
# `run` does everything but exec). Whatever the arguments, the command
# returns a status and never raises: 0, 1 with one line on stderr, or 2 with
# a message naming the option or argument at fault plus the --help line.
# A few of the cases also run as real processes.
class CLIFuzzTest < Minitest::Test
  include CLIRunner

  FLAGS = {
    "run" => %w[--mode --format --coalesce --exact --interval --max-depth -o --out --force -h --help],
    "report" => %w[--sample-index --top --by --sort --focus --ignore --hide --thread --hide-gc --method --strings --notes
                   --format -o --out --force -h --help],
    "diff" => %w[--sample-index --top -h --help],
    "merge" => %w[-o --out --force -h --help],
  }.freeze
  # Flags without a value.
  SWITCHES = %w[--exact --force --hide-gc --strings --notes -h --help].freeze
  # A usage message about no single option.
  GENERIC = Regexp.union("unknown command", "missing COMMAND", "missing FILE", "too many arguments", "need two profiles",
                         "invalid option", "missing argument", "needless argument", "ambiguous option",
                         "RUBYOPT cannot hold", "need two or more profiles", "missing -o OUT",
                         "is one of the profiles to merge", "are two reports", "is a text report").freeze

  def setup
    skip_unless_protoc!
    @dir = Dir.mktmpdir("fathom-cli-fuzz")
    @files = {
      heap: file("heap.pb.gz", TextProfile.new.sample(%w[leaf main], [1, 64, 1, 64], { "class" => "String" }).gzipped),
      gc: file("gc.json.gz", File.binread(File.join(TestHelper::ROOT, "examples/gc_profile.json.gz"))),
      junk: file("junk.pb.gz", "\x1f\x8bjunk".b),
      empty: file("empty.pb.gz", ""),
    }
  end

  def teardown
    FileUtils.rm_rf(@dir) if @dir
  end

  def file(name, bytes)
    File.join(@dir, name).tap { |path| File.binwrite(path, bytes) }
  end

  # A random command line: a command, some flags with random values,
  # arguments from the files above or the value pool.
  def argv(rng)
    command = %w[run report diff merge run report diff help --help -v bogus].sample(random: rng)
    flags = FLAGS.fetch(command, [])
    args = [command]
    rng.rand(0..4).times do
      break if flags.empty?

      flag = flags.sample(random: rng)
      if rng.rand(4).zero?
        args << "#{flag}=#{cli_value(rng)}" unless SWITCHES.include?(flag)
      else
        args << flag
        args << cli_value(rng) unless SWITCHES.include?(flag) && rng.rand(3).positive?
      end
    end
    args << "--#{without_nul(Fuzz.random_text(rng))}" if rng.rand(15).zero?
    case command
    when "run" then args.push("--", "true") if rng.rand(4).positive?
    when "report", "diff", "merge" then rng.rand(0..3).times { args << operand(rng) }
    end
    args
  end

  def cli_value(rng)
    value = Fuzz.value(rng, ["10ms", "1ms", "64", "heap", "gc", "heap,gc", "firefox", "inuse_space", "alloc_objects", "5",
                             "site", "line", "gem", "class", "cum", "html", "pprof", "leaf", "main", "(", "out.pb.gz"])
    text = begin
      String === value ? value : value.to_s
    rescue StandardError
      "x"
    end
    text = "x" unless String === text
    without_nul(text)
  end

  # A command line cannot hold a NUL byte (execve's strings end at the
  # first): spawn raises ArgumentError before the CLI is reached.
  def without_nul(text)
    text.b.delete("\0").force_encoding(text.encoding)
  end

  def operand(rng)
    rng.rand(3).zero? ? cli_value(rng) : @files.values.sample(random: rng)
  end

  def check(where, args, result)
    lines = result.err.lines
    case result.status
    when 0 then nil
    when 1
      assert_equal 1, lines.size, "#{where}: exit 1 must say why on one line: #{args.inspect}\n#{result.err}"
      assert_match(/\Afathom (report|diff|run|merge): /, lines.first, "#{where}: #{args.inspect}")
    when 2
      assert_operator lines.size, :>=, 1, "#{where}: #{args.inspect}"
      return if lines.first.start_with?("Usage: fathom COMMAND") # bare `fathom`

      assert_equal 2, lines.size, "#{where}: #{args.inspect}\n#{result.err}"
      assert_match(/\ARun `fathom( \w+)? --help` for usage\.$/, lines.last, "#{where}: #{args.inspect}")
      message = lines.first
      named = FLAGS.values.flatten.uniq.select { |flag| args.any? { |a| a == flag || a.b.start_with?("#{flag}=".b) } }
      assert(GENERIC.match?(message) || named.any? { |flag| message.include?(flag) } || message.include?("sample_index") ||
             message.include?("--out") || message.match?(/refusing|is a directory|is a device|cannot write|symbolic link/),
             "#{where}: the usage error names no option of #{args.inspect}: #{message}")
    when 127
      # `run --force 9813 -- ...`: a value after a switch is the command
      # (seed 1997950834), and a command that is not found is 127, as in a shell.
      assert_equal "run", args.first, "#{where}: #{args.inspect}"
      assert_match(/\Afathom run: command not found: .*\n\z/, result.err, "#{where}: #{args.inspect}")
    else
      flunk "#{where}: exit #{result.status} for #{args.inspect}\n#{result.err}"
    end
  end

  def test_random_command_lines_in_process
    Dir.chdir(@dir) do
      Fuzz.run("cli") do |rng, n|
        args = argv(rng)
        result =
          begin
            run_cli(*args)
          rescue Exception => e # rubocop:disable Lint/RescueException
            flunk "#{Fuzz.where("cli", n)}: #{args.inspect} raised #{e.class}: #{e.message}\n#{e.backtrace.first(5).join("\n")}"
          end
        check(Fuzz.where("cli", n), args, result)
      end
    end
  end

  # The same through exe/fathom: no stack trace reaches the terminal.
  def test_a_few_as_real_processes
    Fuzz.run("cli-process", seconds: 0, min_cases: 4) do |rng, n|
      args = argv(rng)
      args = args.take_while { |a| a != "--" } + ["--", RbConfig.ruby, "-e", "1"] if args.first == "run"
      # HOME: "-o ~/x" must not reach the real home directory.
      out, err, status = TestHelper.run_fathom(*args, chdir: @dir, env: TestHelper::PLAIN_ENV.merge("HOME" => @dir))
      refute_match(/\.rb:\d+:in [`']/, err, "#{Fuzz.where("cli-process", n)}: a stack trace for #{args.inspect}")
      check(Fuzz.where("cli-process", n), args, CLIRunner::Result.new(status.exitstatus, out, err))
    end
  end
end
