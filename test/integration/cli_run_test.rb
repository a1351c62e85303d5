# frozen_string_literal: true

require "test_helper"
require "support/pprof_raw"

# `fathom run` end to end: a real program under the profiler, a failing exit
# status passed through, the profile read by `fathom report` and by go tool pprof.
class CliRunTest < Minitest::Test
  FIXTURE = File.expand_path("../fixtures/keep_and_drop_script.rb", __dir__)

  def setup
    require_native!
    skip_unless_go!
    @dir = Dir.mktmpdir("fathom-cli")
  end

  def teardown
    FileUtils.rm_rf(@dir)
  end

  def test_run_exact_with_failing_program_then_report
    out = File.join(@dir, "heap.pb.gz")
    _o, err, status = TestHelper.run_fathom("run", "--mode", "heap", "--exact", "-o", out, "--", RbConfig.ruby, FIXTURE,
                                 env: TestHelper::PLAIN_ENV.merge("FIXTURE_EXIT" => "3"))
    assert_equal 3, status.exitstatus, err
    assert_match(/fathom: wrote heap profile to #{Regexp.escape(out)}/, err)

    report, err, status = TestHelper.run_fathom("report", out, "--top", "40", "--by", "function")
    assert status.success?, err
    assert_match(/Type: inuse_space/, report)
    assert_match(/String#\*/, report)

    top = go_pprof("-top", "-symbolize=none", "-sample_index=inuse_space", out)
    assert_match(/String#\*/, top)
    raw = PprofRaw.read(out)
    kept = raw.cum("inuse_space", /Keeper#keep/)
    assert_operator kept.fdiv(raw.total("inuse_space")), :>=, 0.9
    assert_operator raw.cum("inuse_objects", /Keeper#keep/, labels: { "class" => "String" }), :>=, 10_000
  end

  def test_run_sampled_default
    out = File.join(@dir, "sampled.pb.gz")
    _o, err, status = TestHelper.run_fathom("run", "--interval", "50us", "-o", out, "--", RbConfig.ruby, FIXTURE,
                                            env: TestHelper::PLAIN_ENV)
    assert status.success?, err
    raw = PprofRaw.read(out)
    # Sampled estimate of the 20,207 allocations (exact mode's count): sum
    # of w_b x K_b / p over n bursts, K_b ~ Bin(64, p ~ 1/4) kept of the
    # 1 KB strings; n = 20-76 (40 runs, both Rubies), estimate -14.5%..+2%.
    # Below 10,000 needs -51%; the window after the last burst is one gap,
    # <= 5% at n >= 20, so the kept count must be <= 52% of its mean
    # 16n = 320. Chernoff, even halving n for unequal w_b (mean 160):
    # exp(-0.48^2 x 160 / 2) < 1e-7.
    assert_operator raw.total("alloc_objects"), :>, 10_000
    # Every sample of the program's allocations has <main> at its root:
    # P(no kept sample in n >= 20 bursts) = (3/4)^(64 x 20) < e^-360.
    assert_includes raw.function_names, "<main>"
  end
end
