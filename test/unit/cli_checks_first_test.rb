# frozen_string_literal: true

require "test_helper"

# What `fathom` refuses up front rather than after the program ran (issue
# 10): an output it cannot write, and a diff of two different kinds of
# profile, which used to be diffed silently.
class CLIChecksFirstTest < Minitest::Test
  def setup
    @dir = Dir.mktmpdir("fathom-cli-checks")
  end

  def teardown
    FileUtils.rm_rf(@dir)
  end

  # The tests run as root, for whom every directory is writable: a path
  # under a regular file is what cannot be written here.
  def test_run_refuses_an_unwritable_output_before_the_program_runs
    parent = File.join(@dir, "afile")
    File.write(parent, "x")
    ran = File.join(@dir, "ran")
    _, err, status = TestHelper.run_fathom("run", "-o", File.join(parent, "heap.pb.gz"), "--",
                                           RbConfig.ruby, "-e", "File.write(#{ran.dump}, '1')", env: TestHelper::PLAIN_ENV)
    assert_equal 2, status.exitstatus, err
    assert_match(/fathom run: --out #{Regexp.escape(parent)}\/heap\.pb\.gz: the directory #{Regexp.escape(parent)} is not a directory/, err)
    refute_match(/fathom-tmp/, err, "the message names the user's path, not a temp file")
    refute File.exist?(ran), "the program ran although its profile could not be written"
  end

  def test_diff_refuses_profiles_of_different_kinds
    require_native!
    heap = Fathom.profile(mode: :heap, exact: true) { Array.new(1000) { "x" * 10 } }
    heap.write(heap_path = File.join(@dir, "heap.pb.gz"))
    Fathom.retention_snapshot(out: retention_path = File.join(@dir, "retention.pb.gz"), progress: nil)
    _, err, status = TestHelper.run_fathom("diff", heap_path, retention_path)
    # Each file is a usable profile, but not with the other: a data error
    # (exit 1) that names both files.
    assert_equal 1, status.exitstatus, err
    assert_equal "fathom diff: #{heap_path} and #{retention_path}: cannot diff a heap profile against a retention profile\n", err
  end
end
