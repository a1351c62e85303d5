# frozen_string_literal: true

require "test_helper"

# Issue 43, defect 5: a program that called exit! under `fathom run` got no
# profile and no message (exit! skips at_exit handlers, where autorun
# writes the profiles). Now exit!, Kernel.exit! and Process.exit! write
# them first, say so, and exit with the status the program asked for.
class ExitBangTest < Minitest::Test
  def setup
    require_native!
    @dir = Dir.mktmpdir("fathom-exit-bang")
  end

  def teardown
    FileUtils.rm_rf(@dir)
  end

  def run_program(code, mode: "heap")
    out = File.join(@dir, "#{mode}.pb.gz")
    _, err, status = TestHelper.run_fathom("run", "--mode", mode, "--exact", "-o", out, "--", RbConfig.ruby, "-e", code,
                                           env: TestHelper::PLAIN_ENV)
    [out, err, status]
  end

  def test_exit_bang_writes_the_profile_first
    code = 'KEEP = Array.new(1000) { |i| "kept #{i}" }; exit!(3)'
    out, err, status = run_program(code)
    assert_equal 3, status.exitstatus, err
    assert_match(/called exit!, which skips at_exit handlers: writing its profiles first/, err)
    assert_match(/wrote heap profile to #{Regexp.escape(out)}/, err)
    profile = Fathom::Pprof.read_file(out)
    i = profile.sample_type_index("inuse_objects")
    kept = profile.samples.select { |s| s.labels["class"] == "String" }.sum { |s| s.values[i] }
    assert_operator kept, :>=, 1000, "the strings KEEP holds are in use when exit! runs"
  end

  def test_process_exit_bang_and_exit_bang_from_a_method
    ["Process.exit!(0)", "class Job; def run = exit!(5); end; Job.new.run", "Kernel.exit!(true)"].each do |code|
      out, err, status = run_program(code)
      expected = code.include?("5") ? 5 : 0
      assert_equal expected, status.exitstatus, "#{code}: #{err}"
      assert File.size?(out), "#{code}: no profile written: #{err}"
      File.unlink(out)
    end
  end

  # exit! stays private on objects, as Kernel has it.
  def test_exit_bang_keeps_its_visibility
    code = 'p [Object.new.respond_to?(:exit!), Kernel.respond_to?(:exit!), Process.respond_to?(:exit!)]; $stdout.flush; exit!(0)'
    stdout, err, status = TestHelper.run_fathom("run", "-o", File.join(@dir, "v.pb.gz"), "--", RbConfig.ruby, "-e", code,
                                                env: TestHelper::PLAIN_ENV)
    assert_equal 0, status.exitstatus, err
    assert_equal "[false, true, true]\n", stdout
  end
end
