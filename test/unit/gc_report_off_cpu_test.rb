# frozen_string_literal: true

require "test_helper"

# Issue 41: on a busy machine the wall time in GC was read against
# GC.stat(:time) and one of them taken for wrong. Both were right: the
# report now says how much of the wall time the thread spent off the CPU,
# and that GC.stat(:time) counts CPU time. Quiet runs (CPU within a few
# percent of wall) get no such line.
class GcReportOffCpuTest < Minitest::Test
  def report(wall_ns, cpu_ns)
    skip_unless_protoc!
    t = TextProfile.new([%w[wall nanoseconds], %w[cpu nanoseconds], %w[gc_steps count], %w[gcs count]])
    t.duration_nanos = 10_000_000_000
    t.sample(["Garbage Collection"], [wall_ns, cpu_ns, 50, 50],
             "gc type" => "major", "gc reason" => "force", "gc cause" => "method")
    Fathom::Report.for_profile(Fathom::Pprof.read(t.gzipped)).to_s
  end

  def test_a_busy_run_says_how_long_the_thread_was_off_the_cpu
    out = report(4_411_000_000, 944_300_000)
    assert_match(/^time in GC      4.41s wall \(44.11%\), 944.30ms CPU, 50 steps\noff the CPU     3.47s of the wall time in GC \(78.59%\): the thread waited for a CPU \(a busy machine\) or was blocked;\n {16}GC.stat\(:time\) counts CPU time only\n/, out)
  end

  def test_a_quiet_run_has_no_such_line
    refute_match(/off the CPU/, report(170_000_000, 163_000_000))
    assert_nil Fathom::Report::GcOffCpu.line(nil, 5)
    assert_nil Fathom::Report::GcOffCpu.line(0, 0)
  end
end
