# frozen_string_literal: true

require "test_helper"
require "fathom/leaks/normal"
require "fathom/leaks/mann_kendall"
require "fathom/leaks/theil_sen"

# The statistics under the leak verdicts, against values worked by hand or
# tabulated: Mann–Kendall's S, its exact and approximate p-values, the
# Theil–Sen slope and Sen's interval, the normal tail and quantile.
# Deterministic: no randomness here.
class LeaksStatisticsTest < Minitest::Test
  MK = Fathom::Leaks::MannKendall
  TS = Fathom::Leaks::TheilSen
  N = Fathom::Leaks::Normal

  def test_normal_tail_and_quantile
    assert_in_delta 0.025, N.upper_tail(1.959964), 1e-7
    assert_in_delta 1.0e-9, N.upper_tail(5.997807), 1e-12
    assert_in_delta 1.959964, N.quantile(0.975), 1e-6
    assert_in_delta(-2.326348, N.quantile(0.01), 1e-6)
    assert_in_delta(-5.997807, N.quantile(1e-9), 1e-5)
    assert_equal 0.0, N.upper_tail(Float::INFINITY)
    assert_raises(ArgumentError) { N.quantile(1.0) }
  end

  def test_s_and_the_exact_p_value
    r = MK.test([1, 3, 2, 4])
    assert_equal 4, r.s # five pairs rise, one falls
    assert r.exact
    # n = 4: P(S >= 4) = P(inversions <= 1) = (1 + 3) / 4!
    assert_in_delta 4.0 / 24, r.p_increasing, 1e-12
    assert_in_delta 1.0 / 3_628_800, MK.test((1..10).to_a).p_increasing, 1e-15 # 1/10!
    assert_in_delta 1.0, MK.test((1..10).to_a.reverse).p_increasing, 1e-12
  end

  def test_exact_distribution_sums_to_one_and_matches_mahonian_numbers
    assert_equal [1, 3, 5, 6, 5, 3, 1], MK.mahonian(4)
    assert_equal 40_320, MK.mahonian(8).sum
    # P(S >= -N) = 1; P(S >= s) falls as s rises.
    ps = (-28..28).step(2).map { |s| MK.exact_upper(8, s) }
    assert_in_delta 1.0, ps.first, 1e-12
    assert_equal ps.sort.reverse, ps
  end

  def test_ties_use_the_corrected_variance
    r = MK.test([1, 1, 2, 2])
    assert_equal 4, r.s
    refute r.exact
    # (4*3*13 - 2*(2*1*9)) / 18
    assert_in_delta 120.0 / 18, r.variance, 1e-12
    assert_in_delta N.upper_tail(3 / Math.sqrt(120.0 / 18)), r.p_increasing, 1e-12
    flat = MK.test([5] * 12)
    assert_equal 0, flat.s
    assert_equal 1.0, flat.p_increasing
  end

  def test_normal_approximation_close_to_exact_in_the_middle
    ys = [3, 1, 4, 1.5, 5, 9, 2, 6, 5.5, 3.5, 8, 9.7, 9.3, 2.3, 3.8, 4.6]
    exact = MK.test(ys).p_increasing
    s = MK.test(ys).s
    approx = N.upper_tail((s - 1) / Math.sqrt(16 * 15 * 37 / 18.0))
    assert_in_delta exact, approx, 0.01
  end

  def test_theil_sen_is_exact_on_a_line_and_robust_to_an_outlier
    xs = (1..9).to_a.map(&:to_f)
    fit = TS.fit(xs, xs.map { |x| 2 * x + 1 })
    assert_in_delta 2.0, fit.slope, 1e-12
    assert_in_delta 1.0, fit.intercept, 1e-12
    assert_in_delta 2.0, fit.low, 1e-12
    assert_in_delta 2.0, fit.high, 1e-12
    wild = xs.map { |x| 2 * x + 1 }
    wild[4] = 1000.0
    assert_in_delta 2.0, TS.fit(xs, wild).slope, 1e-12, "one wild window does not tilt the line"
  end

  def test_sen_interval_ranks
    # 6 points, 15 slopes; Var S = 6*5*17/18 = 28.33; C = 1.96 * 5.32 = 10.43;
    # lower = slope #floor((15 - 10.43)/2) = #2, upper = #ceil((15 + 10.43)/2) + 1 = #14.
    xs = [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    ys = [1.0, 4.0, 2.0, 8.0, 5.0, 9.0]
    slopes = []
    xs.each_index { |i| ((i + 1)...xs.size).each { |j| slopes << (ys[j] - ys[i]) / (xs[j] - xs[i]) } }
    slopes.sort!
    fit = TS.fit(xs, ys)
    assert_in_delta slopes[1], fit.low, 1e-12
    assert_in_delta slopes[13], fit.high, 1e-12
    assert_in_delta slopes[7], fit.slope, 1e-12
  end

  def test_degenerate_inputs
    fit = TS.fit([1.0], [5.0])
    assert_equal 0.0, fit.slope
    assert_equal 5.0, fit.intercept
    assert_equal 1.0, MK.test([7]).p_increasing
    assert_raises(ArgumentError) { TS.fit([1.0, 2.0], [1.0]) }
  end
end
