# frozen_string_literal: true

require "test_helper"
require "support/cli_runner"

# `fathom leaks` on bad usage and bad files: exit 2 naming the option, or
# exit 1 naming the file once, never a stack trace.
class LeaksUsageTest < Minitest::Test
  include CLIRunner

  def setup
    @dir = Dir.mktmpdir("fathom-leaks-usage")
  end

  def teardown
    FileUtils.rm_rf(@dir)
  end

  def test_usage_errors_name_the_option
    {
      [] => /\Afathom leaks: missing DIR, FILE or URL/,
      ["--min-windows", "0", @dir] => /\Afathom leaks: --min-windows must be in 4\.\.10000, got 0$/,
      ["--windows", "x", @dir] => /\Afathom leaks: --windows must be an integer in 4\.\.100000, got "x"$/,
      ["--every", "5s", @dir] => /\Afathom leaks: --every is for a URL$/,
      ["http://127.0.0.1:1/debug/fathom", "http://127.0.0.1:2/debug/fathom"] => /one URL at a time/,
      ["--bogus", @dir] => /invalid option: --bogus/,
    }.each do |args, pattern|
      r = run_cli("leaks", *args)
      assert_equal 2, r.status, "#{args}: #{r.err}"
      assert_match pattern, r.err
      assert_equal "Run `fathom leaks --help` for usage.", r.err.lines.last.chomp
    end
  end

  def test_bad_files_are_named_once
    junk = File.join(@dir, "junk.pb.gz")
    File.write(junk, "junk")
    r = run_cli("leaks", junk)
    assert_equal 1, r.status
    assert_equal 1, r.err.scan(junk).size, r.err
    assert_match(/not a pprof profile/, r.err)
    refute_match(/\.rb:\d+:in /, r.err)

    r = run_cli("leaks", File.join(@dir, "missing"))
    assert_equal 1, r.status
    assert_match(/no such file or directory/, r.err)

    FileUtils.cp(junk, File.join(@dir, "heap-1-20261207T070000Z-1.pb.gz"))
    FileUtils.rm(junk)
    r = run_cli("leaks", @dir)
    assert_equal 1, r.status
    assert_match(/skipped .*heap-1-20261207T070000Z-1\.pb\.gz: not a pprof profile/, r.err)
    assert_match(/no heap profile found/, r.err)
  end
end
