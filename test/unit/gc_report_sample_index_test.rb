# frozen_string_literal: true

require "test_helper"

# Issue 10, item 11: `fathom report --sample-index` was ignored for GC
# profiles. It now picks the column the GC table is sorted by, and a name
# a GC profile does not have is refused with the valid ones.
class GcReportSampleIndexTest < Minitest::Test
  def setup
    skip_unless_protoc!
    t = TextProfile.new([%w[wall nanoseconds], %w[cpu nanoseconds], %w[gc_steps count], %w[gcs count]])
    gc = "Garbage Collection"
    # Long minor GCs by the wall clock; many cheap major ones by count.
    t.sample([gc], [9_000_000, 8_000_000, 30, 2], "gc type" => "minor", "gc reason" => "", "gc cause" => "newobj")
    t.sample([gc], [1_000_000, 900_000, 5, 7], "gc type" => "major", "gc reason" => "force", "gc cause" => "method")
    @bytes = t.gzipped
    @profile = Fathom::Pprof.read(@bytes)
  end

  def table_types(report)
    report.to_s.lines.drop_while { |l| !l.start_with?("by type") }.drop(2).map { |l| l.split[5] }
  end

  def test_sorted_by_wall_by_default
    report = Fathom::Report.for_profile(@profile)
    assert_equal %w[minor major], table_types(report)
    refute_match(/sorted by/, report.to_s)
  end

  def test_sample_index_picks_the_sort_column
    report = Fathom::Report.for_profile(@profile, sample_index: "gcs")
    assert_equal %w[major minor], table_types(report)
    assert_match(/by type, reason and cause \(sorted by gcs\)/, report.to_s)
    assert_equal "gcs", report.sample_type
    assert_equal %w[minor major], table_types(Fathom::Report.for_profile(@profile, sample_index: :gc_steps))
    assert_equal %w[major minor], table_types(Fathom::Report.for_profile(@profile, sample_index: 3))
  end

  def test_a_name_a_gc_profile_does_not_have_is_refused_with_the_valid_ones
    e = assert_raises(ArgumentError) { Fathom::Report.for_profile(@profile, sample_index: "inuse_space") }
    assert_match(/sample_index "inuse_space".*available: wall, cpu, gc_steps, gcs/, e.message)
    assert_raises(ArgumentError) { Fathom::Report.for_profile(@profile, sample_index: 9) }
    assert_raises(TypeError) { Fathom::Report.for_profile(@profile, sample_index: 1.5) }
  end

  def test_cli
    Dir.mktmpdir do |dir|
      path = File.join(dir, "gc.pb.gz")
      File.binwrite(path, @bytes)
      out, err, status = TestHelper.run_fathom("report", path, "--sample-index", "gcs")
      assert status.success?, err
      assert_match(/sorted by gcs/, out)
      _, err, status = TestHelper.run_fathom("report", path, "--sample-index", "inuse_space")
      refute status.success?
      assert_match(/available: wall, cpu, gc_steps, gcs/, err)
    end
  end

  # A Firefox file has no sample types: refused rather than ignored.
  def test_firefox_gc_profile_refuses_a_sample_index
    require_native!
    profile = Fathom::GcProfiler.new(format: :firefox).profile { GC.start }
    e = assert_raises(ArgumentError) { profile.report(sample_index: "wall") }
    assert_match(/sample_index does not apply to a Firefox Profiler file/, e.message)
    assert_match(/GC profile/, profile.report)
    assert_raises(ArgumentError) { Fathom::Report.for_bytes(profile.bytes, sample_index: "cpu") }
  end
end
