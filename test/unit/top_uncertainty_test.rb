# frozen_string_literal: true

require "test_helper"

# `fathom report` on a sampled heap profile: each row shows how many samples
# stand behind it and flat%'s interval; rows resting on a handful of
# samples are marked, and a profile resting on a handful overall is called
# a guess up front.
class TopUncertaintyTest < Minitest::Test
  TYPES = [%w[alloc_objects count], %w[alloc_space bytes], %w[inuse_objects count], %w[inuse_space bytes],
           %w[alloc_samples count], %w[inuse_samples count]].freeze

  def setup
    skip_unless_protoc!
  end

  def report(profile, **opts)
    Fathom::Report::Top.new(Fathom::Pprof.decode(profile.gzipped), **opts).to_s
  end

  def row(text, name)
    text.lines.find { |l| l.rstrip.end_with?(" #{name}") } or flunk("no row #{name} in\n#{text}")
  end

  def test_site_backed_by_a_handful_of_samples_is_flagged
    t = TextProfile.new(TYPES)
    t.sample(%w[Many#site main], [40_000, 4_000_000, 20_000, 2_000_000, 400, 200])
    t.sample(%w[Few#site main], [300, 3_000_000, 300, 3_000_000, 3, 3]) # big, but 3 samples
    t.default_sample_type = "inuse_space"
    text = report(t)
    assert_match(/samples\s+flat% 95% interval/, text)
    few = row(text, "Few#site")
    assert_match(/\s3\? /, few)
    many = row(text, "Many#site")
    assert_match(/\s200  /, many)
    refute_includes many, "?"
    assert_match(/\?: fewer than 10 samples behind the row, a guess/, text)
    refute_match(/Warning/, text)
    # Intervals: Few's 60% share rests on 3 samples, Many's 40% on 200.
    top = Fathom::Report::Top.new(Fathom::Pprof.decode(t.gzipped))
    rows = top.rows.to_h { |r| [r.name, r] }
    low, high = top.flat_share_interval(rows["Few#site"])
    assert_operator low, :<, 20
    assert_equal 100.0, high
    low, high = top.flat_share_interval(rows["Many#site"])
    assert_operator low, :>, 33
    assert_operator high, :<, 47
  end

  def test_one_sample_is_never_shown_as_the_heap_unmarked
    t = TextProfile.new(TYPES)
    t.sample(%w[Regexp#site main], [500, 5_000_000, 500, 5_000_000, 1, 1])
    t.sample(%w[Other#site main], [9_000, 900_000, 0, 0, 105, 0])
    t.default_sample_type = "inuse_space"
    text = report(t)
    assert_match(/Warning: the whole inuse_space rests on 1 sample: every share below is a guess/, text)
    assert_match(/\s1\? /, row(text, "Regexp#site"))
    # The allocation view of the same profile rests on 106 samples.
    alloc = report(t, sample_index: "alloc_objects")
    refute_match(/Warning/, alloc)
    assert_match(/\s105  /, row(alloc, "Other#site"))
  end

  def test_profiles_without_counts_keep_the_plain_table
    t = TextProfile.new
    t.sample(%w[leaf main], [1, 10, 1, 10])
    text = report(t)
    refute_match(/samples/, text)
    refute_match(/interval/, text)
  end
end
