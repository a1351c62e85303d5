# frozen_string_literal: true

require "test_helper"
require "support/pprof_raw"

# Issue 11: a ~1 s program profiled with the defaults has few samples and
# fewer alive. The in-use report must not pass one sample off as the heap:
# every row resting on fewer than 10 samples is marked, and a profile
# whose in-use total rests on fewer than 10 says so up front.
class ShortProgramUncertaintyTest < Minitest::Test
  FIXTURE = File.expand_path("../fixtures/short_program.rb", __dir__)

  def setup
    require_native!
    skip_unless_protoc!
    @dir = Dir.mktmpdir("fathom-short")
  end

  def teardown
    FileUtils.rm_rf(@dir)
  end

  def test_short_program_in_use_report_marks_what_rests_on_few_samples
    out = File.join(@dir, "heap.pb.gz")
    _o, err, status = TestHelper.run_fathom("run", "--mode", "heap", "-o", out, "--", RbConfig.ruby, FIXTURE,
                                            env: TestHelper::PLAIN_ENV)
    assert status.success?, err
    raw = PprofRaw.read(out)
    inuse_samples = raw.total("inuse_samples")
    # Ticks follow the program's CPU: 97-99 bursts in its ~1 s (6 runs, both
    # Rubies; half that if a loaded machine halves its CPU), each keeping
    # each of 64 candidates with p ~ 1/4: P(none) <= (3/4)^(64 x 40) < e^-700.
    # What follows is deterministic given the file, whatever it holds.
    assert_operator raw.total("alloc_samples"), :>, 0

    report, err, status = TestHelper.run_fathom("report", out, "--top", "100")
    assert status.success?, err
    assert_match(/\(\d+ samples, #{inuse_samples} of them live at the end\); values are estimates/, report)
    if inuse_samples.zero?
      assert_match(/Warning: no sample stands behind inuse_space/, report)
    elsif inuse_samples < 10
      assert_match(/Warning: the whole inuse_space rests on #{inuse_samples} samples?: every share below is a guess/, report)
    end
    rows = report.lines.grep(/\A\s*\S+\s+\S+%\s+\S+%\s+\S+\s+\S+%\s+\d+[? ] /)
    assert_equal inuse_samples.zero?, rows.empty?, report
    rows.each do |line|
      samples = line[/%\s+(\d+)[? ] /, 1].to_i
      flat_zero = line.split.first.match?(/\A0(\.0+)?[A-Za-z]*\z/)
      next if flat_zero

      if samples < 10
        assert_match(/\s#{samples}\? /, line, "row on #{samples} samples is not marked:\n#{report}")
      else
        refute_match(/\d\? /, line)
      end
    end
    # The 100% case: a row that holds the whole in-use total is marked
    # unless at least 10 samples stand behind it.
    rows.select { |l| l.include?("  100% ") && l.split[1] == "100%" }.each do |line|
      samples = line[/%\s+(\d+)[? ] /, 1].to_i
      assert(samples >= 10 || line.include?("#{samples}?"), "unmarked 100% row:\n#{report}")
    end
  end
end
