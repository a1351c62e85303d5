# frozen_string_literal: true

require "test_helper"
require "support/cli_runner"

# Issue 10, item 9, on the command line: values that escaped the option
# checks. Each is now a usage error (exit 2) that names the option, or works.
class CLIUsageTest < Minitest::Test
  include CLIRunner

  def setup
    @dir = Dir.mktmpdir("fathom-cli-usage")
  end

  def teardown
    FileUtils.rm_rf(@dir)
  end

  def assert_usage(pattern, *args)
    r = run_cli(*args)
    assert_equal 2, r.status, "stdout: #{r.out}\nstderr: #{r.err}"
    assert_match pattern, r.err
    assert_equal 2, r.err.lines.size, r.err
    assert_match(/\ARun `fathom( \w+)? --help` for usage\.\z/, r.err.lines.last.chomp)
    r
  end

  # FloatDomainError (Infinity) with a stack trace.
  def test_interval_with_a_huge_exponent
    assert_usage(/\Afathom run: --interval must be between 10us and 3600s, got "1e99999999"$/,
                 "run", "--interval", "1e99999999", "--", "ruby", "-e", "1")
    assert_usage(/--interval must be between/, "run", "--interval", "1e-99999999", "--", "true")
  end

  # --coalesce had no upper bound here, so the program started and then
  # ran unprofiled when GcProfiler refused the value.
  def test_coalesce_has_the_profilers_bounds
    assert_usage(/\Afathom run: --coalesce must be between 1ns and 60s, got "1e30"$/,
                 "run", "--mode", "gc", "--coalesce", "1e30", "--", "true")
    assert_usage(/--coalesce must be between 1ns and 60s, got "61s"/, "run", "--mode", "gc", "--coalesce", "61s", "--", "true")
    assert_equal 0, run_cli("run", "--mode", "gc", "--coalesce", "0", "-o", File.join(@dir, "g.pb.gz"), "--", "true").status
  end

  # RangeError from Array#first: now more rows than a report has shows all.
  def test_report_top_beyond_every_report
    skip_unless_protoc!
    path = File.join(@dir, "p.pb.gz")
    File.binwrite(path, TextProfile.new.sample(%w[a main], [1, 1, 1, 1]).gzipped)
    r = run_cli("report", "--top", "99999999999999999999999", path)
    assert_equal 0, r.status, r.err
    assert_match(/\d+B\s+100%\s+100%\s+\d+B\s+100%  a app\.rb:\d+$/, r.out)
    assert_usage(/--top must be an integer of at least 1 \(at most 64 characters\)/, "report", "--top", "9" * 100, path)
    assert_usage(/--top must be at least 1, got 0$/, "report", "--top", "0", path)
  end

  # File.expand_path raised ArgumentError ("user ... doesn't exist") out of
  # the CLI, with a stack trace.
  def test_out_naming_no_user
    assert_usage(/\Afathom run: --out is not a usable path \(user fathom-no-such-user doesn't exist\)/,
                 "run", "-o", "~fathom-no-such-user/x.pb.gz", "--", "true")
  end

  # OptionParser raised ArgumentError ("invalid byte sequence in UTF-8") on
  # any argument with invalid UTF-8, a file name included.
  def test_arguments_with_invalid_utf8
    r = run_cli("report", "#{@dir}/\xff.pb.gz")
    assert_equal 1, r.status, r.err
    assert_match(%r{\Afathom report: .*/\uFFFD\.pb\.gz: cannot read it: No such file or directory\n\z}, r.err)
    assert_usage(/invalid option: --t\uFFFD$/, "report", "--t\xff", "x")
    assert_usage(/--interval must be a positive duration/, "run", "--interval", "1\xffms", "--", "true")
    assert_usage(/--mode must be one or more of heap, gc, retention/, "run", "--mode", "he\xffap", "--", "true")
    # Found by the CLI fuzzer: joining a binary argument with a UTF-8 one for
    # the message raised Encoding::CompatibilityError.
    assert_usage(/\Afathom report: too many arguments: \uFFFD １$/, "report", "\xff", "１")
    r = run_cli("diff", "#{@dir}/\xff", "#{@dir}/１")
    assert_equal 1, r.status
    assert_match(/cannot read it/, r.err)
  end

  # Found by the CLI fuzzer: OptionParser answered --version (and --v, its
  # abbreviation) by raising SystemExit ("version unknown", exit 1), and
  # --*-completion-bash by printing the flags and exiting 0.
  def test_optparse_officious_options_are_unknown
    assert_usage(/\Afathom diff: invalid option: --v$/, "diff", "--v", "a", "b")
    assert_usage(/\Afathom report: invalid option: --version$/, "report", "--version", "a")
    assert_usage(/\Afathom report: invalid option: --\*-completion-bash=-$/, "report", "--*-completion-bash=-")
    assert_usage(/\Afathom run: invalid option: --\*-completion-zsh=x$/, "run", "--*-completion-zsh=x", "--", "true")
  end

  # Found by the CLI fuzzer: `--T 5` was completed (case-insensitively) to
  # --top 5, and the error then named --top, an option the user never typed.
  # Options are spelled in full; `-o FILE` and `--top=3` still parse.
  def test_abbreviated_options_are_unknown
    assert_usage(/\Afathom report: invalid option: --T$/, "report", "--T", "5", "a")
    assert_usage(/\Afathom report: invalid option: --he$/, "report", "--he")
    assert_usage(/\Afathom run: invalid option: --inter$/, "run", "--inter", "1ms", "--", "true")
    assert_usage(/\Afathom report: invalid option: --top_$/, "report", "--top_", "5", "a")
    r = run_cli("report", "--help")
    assert_equal 0, r.status
    assert_match(/\AUsage: fathom report/, r.out)
  end

  # The exit statuses the help now documents: 1 for data, 2 for usage.
  def test_help_documents_the_exit_statuses
    r = run_cli("--help")
    assert_equal 0, r.status
    assert_match(/^Exit status:\n  0  success\n  1  a file cannot be read or is not a usable profile.*\n  2  bad usage/, r.out)
  end
end
