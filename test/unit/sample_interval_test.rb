# frozen_string_literal: true

require "test_helper"
require "fathom/report/sample_interval"

# The interval a report gives a sampled estimate, against Garwood's exact
# Poisson interval (tabulated values, chi-square quantiles).
class SampleIntervalTest < Minitest::Test
  SI = Fathom::Report::SampleInterval

  def test_close_to_the_exact_poisson_interval
    { 5 => [0.3247, 2.3337], 10 => [0.4795, 1.8390], 100 => [0.8136, 1.2163] }.each do |n, (low, high)|
      got_low, got_high = SI.factors(n)
      assert_in_delta low, got_low, 0.01 * low, "low end for n=#{n}"
      assert_in_delta high, got_high, 0.01 * high, "high end for n=#{n}"
    end
  end

  def test_small_counts_err_on_the_wide_side
    low, high = SI.factors(2) # exact: 0.1211, 3.6123
    assert_operator low, :<=, 0.1211
    assert_operator low, :>=, 0.1211 * 0.9
    assert_in_delta 3.6123, high, 0.04
  end

  def test_one_sample_is_wide_and_never_narrower_than_exact
    low, high = SI.factors(1)
    assert_operator low, :<=, 0.0253 # exact: 0.0253
    assert_in_delta 5.572, high, 0.05
  end

  def test_narrows_with_more_samples_and_marks_few
    widths = [1, 5, 10, 50, 1000].map { |n| SI.factors(n).then { |l, h| h - l } }
    assert_equal widths.sort.reverse, widths
    assert SI.few?(9)
    refute SI.few?(10)
  end

  def test_bad_count_raises
    assert_raises(ArgumentError) { SI.factors(-1) }
    assert_raises(ArgumentError) { SI.factors(1.5) }
  end
end
