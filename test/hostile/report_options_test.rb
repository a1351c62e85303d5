# frozen_string_literal: true

require "test_helper"
require "support/option_assertions"

# Issue 10, item 9, for the reports and Fathom::Profile: options that
# reached Array#first (RangeError) or were not checked at all.
class ReportOptionsTest < Minitest::Test
  include OptionAssertions

  # top: 2**70 reached Array#first (RangeError); a top beyond every report
  # now shows all rows.
  def test_report_top_may_be_any_positive_integer
    skip_unless_protoc!
    bytes = TextProfile.new.sample(%w[a main], [1, 1, 1, 1]).gzipped
    assert_match(/main/, Fathom::Report.for_bytes(bytes, top: 2**70).to_s)
    assert_match(/main/, Fathom::Profile.new(bytes).report(top: 99_999_999_999_999_999_999_999))
    assert_option_error(ArgumentError, "top") { Fathom::Report.for_bytes(bytes, top: 0) }
    assert_option_error(TypeError, "top") { Fathom::Report.for_bytes(bytes, top: "5") }
    assert_option_error(TypeError, "sample_index") { Fathom::Report.for_bytes(bytes, sample_index: 1.5) }
  end

  def test_diff_and_retention_reports_check_top_and_sample_index
    types = [%w[retained_space bytes], %w[inuse_space bytes], %w[inuse_objects count]]
    profile = Fathom::Pprof::Profile.new(types, [], {}, {}, {}, [""], 0, 0, nil, 0, nil, [])
    assert_option_error(TypeError, "top") { Fathom::Report::Retention.new(profile, top: "x") }
    assert_option_error(TypeError, "top") { Fathom::Report::Diff.new(profile, profile, top: :all) }
    assert_option_error(TypeError, "sample_index") { Fathom::Report::Diff.new(profile, profile, sample_index: []) }
    assert_option_error(ArgumentError, "sample_index") { Fathom::Report::Diff.new(profile, profile, sample_index: "cpu") }
    assert_option_error(TypeError, "before") { Fathom::Report::Diff.new(nil, profile) }
    assert_match(/No path grew/, Fathom::Report::Diff.new(profile, profile, sample_index: :inuse_space, top: 2**80).to_s)
  end

  def test_profile_new_checks_its_options
    assert_option_error(TypeError, "stats") { Fathom::Profile.new("x", "stats") }
    assert_option_error(ArgumentError, "format") { Fathom::Profile.new("x", format: :svg) }
    assert_option_error(ArgumentError, "kind") { Fathom::Profile.new("x", kind: :io) }
  end

  # Each report called methods on its profile argument: nil.sample_types.
  def test_reports_check_their_profile_argument
    assert_option_error(TypeError, "profile") { Fathom::Report::Top.new(nil) }
    assert_option_error(TypeError, "profile") { Fathom::Report::GcSummary.new("bytes") }
    assert_option_error(TypeError, "profile") { Fathom::Report::Retention.new(BasicObject.new) }
    assert_option_error(TypeError, "profile") { Fathom::Report.for_profile({}) }
    assert_option_error(TypeError, "profile") { Fathom::Report.kind(nil) }
    assert_option_error(TypeError, "after") { Fathom::Report::Diff.new(Fathom::Pprof::Profile.new([], [], {}, {}, {}, [""], 0, 0, nil, 0, nil, []), 1) }
  end

  def test_profile_load_checks_its_path
    assert_option_error(ArgumentError, "path") { Fathom::Profile.load("a\0b") }
    assert_option_error(TypeError, "path") { Fathom::Profile.load(nil) }
  end
end
