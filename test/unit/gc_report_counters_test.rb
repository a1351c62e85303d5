# frozen_string_literal: true

require "test_helper"
require "json"

# Issue 25, item 3: a GC profile from Ruby's counters (gc_source: :counters)
# has the sample types cpu (GC.stat(:time): process CPU time in GC) and gcs
# only. Every reader takes it for a GC profile, and the report shows what
# was measured: CPU time said to come from GC.stat(:time), no wall or steps
# column, "-" where a row's time is not known.
class GcReportCountersTest < Minitest::Test
  GC_FRAME = "Garbage Collection"

  def setup
    skip_unless_protoc!
  end

  # What the counters source writes: 3 reads' worth of GCs.
  def counters_profile(scale: 1)
    t = TextProfile.new([%w[cpu nanoseconds], %w[gcs count]])
    t.default_sample_type = "cpu"
    t.duration_nanos = 1_000_000_000
    t.comments = ["fathom.gc.source=counters poll_ns=10000000", "fathom.gc.coalesce_ns=10000000"]
    t.sample([GC_FRAME], [50_000_000 * scale, 5], "gc type" => "major", "gc reason" => "force", "gc cause" => "method",
                                                  "thread" => "GC")
    t.sample([GC_FRAME], [8_000_000, 12], "gc type" => "minor", "gc cause" => "newobj", "thread" => "GC")
    t.sample([GC_FRAME], [0, 4], "gc type" => "minor", "gc cause" => "unseen", "thread" => "GC")
    t
  end

  def decoded(text_profile = counters_profile)
    Fathom::Pprof.read(text_profile.gzipped)
  end

  def test_every_reader_takes_it_for_a_gc_profile
    profile = decoded
    assert Fathom::Report::GcSummary.gc_profile?(profile)
    refute Fathom::Report::CpuSummary.cpu_profile?(profile)
    assert_equal :gc, Fathom::Report.kind(profile)
    assert_kind_of Fathom::Report::GcSummary, Fathom::Report.for_profile(profile)
    assert_equal :gc, Fathom::Profile.new(counters_profile.gzipped).kind
  end

  def test_report_shows_cpu_time_from_gc_stat_and_no_unmeasured_column
    summary = Fathom::Report::GcSummary.new(decoded)
    text = summary.to_s
    lines = text.lines.map(&:chomp)
    assert_equal "GC profile: 1s of wall time, 21 GCs (16 minor, 5 major)", lines[0]
    assert_equal "time in GC      58ms CPU (5.80% of the wall time), from GC.stat(:time)", lines[1]
    assert_match(/^source\s+counters: Ruby's GC counters, read every 10ms \(no GC hooks\)\. Time in GC is the process CPU time$/,
                 text)
    assert_match(/wall time, pauses and steps need --gc-source hooks/, text)
    table = text[/^by type, reason and cause\n(.*?)^unseen:/m, 1].lines.map(&:split)
    assert_equal %w[cpu cpu% GCs type reason cause], table[0]
    assert_equal [%w[50ms 86.21% 5 major force method], %w[8ms 13.79% 12 minor - newobj], %w[- - 4 minor - unseen]],
                 table.drop(1)
    refute_match(/wall%|steps  |\bwall\s+\S+%/, text)
    assert summary.counters_layout?
    assert_nil summary.total(:wall)
    assert_nil summary.total(:steps)
    assert_equal 58_000_000, summary.total(:cpu)
    assert_equal "cpu", summary.sample_type
  end

  # Another writer's hooks-layout file (wall and gc_steps, nothing else)
  # still reads its missing columns as 0, as before.
  def test_a_hooks_layout_without_cpu_or_gcs_still_reports
    t = TextProfile.new([%w[wall nanoseconds], %w[gc_steps count]])
    t.sample([GC_FRAME], [3_000_000, 4], "gc type" => "minor", "gc cause" => "newobj")
    summary = Fathom::Report::GcSummary.new(decoded(t))
    refute summary.counters_layout?
    assert_equal 0, summary.total(:cpu)
    assert_match(/^\s+3ms\s+100%\s+0\s+4\s+0\s+minor\s+-\s+newobj$/, summary.to_s)
  end

  def test_sample_index_offers_the_columns_the_file_has
    profile = decoded
    by_gcs = Fathom::Report.for_profile(profile, sample_index: "gcs").to_s
    assert_match(/by type, reason and cause \(sorted by gcs\)/, by_gcs)
    assert_equal %w[minor major minor], by_gcs.lines.drop_while { |l| !l.start_with?("by type") }.drop(2)
                                             .grep(/\A\s+\S+\s+\S+\s+\d/).map { |l| l.split[3] }
    %w[wall gc_steps].each do |name|
      e = assert_raises(ArgumentError) { Fathom::Report.for_profile(profile, sample_index: name) }
      assert_match(/available: cpu, gcs/, e.message)
    end
  end

  def test_fathom_diff_compares_two_counters_profiles_by_cpu
    before = decoded
    after = decoded(counters_profile(scale: 3))
    text = Fathom::Report::Diff.new(before, after).to_s
    assert_match(/\AGrowth of cpu: \+100ms \(58ms -> 158ms\)/, text)
  end

  def test_cli_report_and_diff
    Dir.mktmpdir do |dir|
      a = File.join(dir, "a.pb.gz")
      b = File.join(dir, "b.pb.gz")
      File.binwrite(a, counters_profile.gzipped)
      File.binwrite(b, counters_profile(scale: 3).gzipped)
      out, err, status = TestHelper.run_fathom("report", a)
      assert status.success?, err
      assert_match(/^time in GC\s+58ms CPU/, out)
      out, err, status = TestHelper.run_fathom("diff", a, b)
      assert status.success?, err
      assert_match(/Growth of cpu/, out)
      _, err, status = TestHelper.run_fathom("report", a, "--sample-index", "wall")
      assert_equal 2, status.exitstatus
      assert_match(/available: cpu, gcs/, err)
      out, = TestHelper.run_fathom("report", "--help")
      assert_match(/--gc-source counters profile has cpu and gcs only/, out)
    end
  end

  # The Firefox file of the counters source: "GCPoll" markers with counts by
  # type and CPU time; the summary says so and shows no wall time or steps.
  def test_firefox_summary_of_gc_poll_markers
    markers = [
      { "type" => "GCPoll", "gcs" => 3, "minor_gcs" => 3, "major_gcs" => 0, "cpu_ms" => 4, "latest" => "minor" },
      { "type" => "GCPoll", "gcs" => 2, "minor_gcs" => 1, "major_gcs" => 1, "cpu_ms" => 9, "latest" => "major",
        "reason" => "force", "gc_cause" => "method" },
    ]
    json = { "meta" => { "profilingStartTime" => 0, "profilingEndTime" => 100.0 },
             "threads" => [{ "name" => GC_FRAME, "tid" => 0, "markers" => { "data" => markers, "length" => 2 } }] }
    summary = Fathom::Report::FirefoxSummary.new(json)
    assert summary.counters?
    assert_in_delta 13.0, summary.gc_ms
    lines = summary.to_s.lines.map(&:chomp)
    assert_equal "100ms of wall time, 5 GCs (4 minor, 1 major), 2 reads of Ruby's GC counters that saw GCs", lines[1]
    assert_equal "time in GC      13ms CPU (13.00% of the wall time), from GC.stat(:time) (source: counters; no wall " \
                 "time or steps)", lines[2]
    assert_equal "longest read    9ms CPU in GC", lines[3]
  end
end
