# frozen_string_literal: true

require "test_helper"
require "fathom/leaks/trend"

# Trend's classes on series whose truth is known: exact series (no sampling
# noise) by shape, and sampled series simulated the way the heap sampler
# sees a site, with each window's uncertainty. Deterministic: the
# simulations draw from Random.new(seed) with fixed seeds, so every run
# sees the same series and a verdict cannot change by chance.
class LeaksTrendTest < Minitest::Test
  T = Fathom::Leaks::Trend
  MB = 1 << 20

  def points(ys, b = 0.0)
    T::Points.new((1..ys.size).map(&:to_f), ys.map(&:to_f), Array.new(ys.size, b.to_f))
  end

  # Every prefix of at least `from` windows: what a live monitor sees as
  # the windows come in.
  def over_prefixes(ys, bs, from: 8)
    (from..ys.size).map do |n|
      pts = T::Points.new((1..n).map(&:to_f), ys.first(n).map(&:to_f), bs.first(n).map(&:to_f))
      T.classify(pts)
    end
  end

  def kinds_over_prefixes(ys, bs, from: 8)
    over_prefixes(ys, bs, from: from).map(&:kind)
  end

  def leaks_over_prefixes(ys, bs, from: 8)
    over_prefixes(ys, bs, from: from).map(&:leak?)
  end

  def test_a_steady_exact_leak_is_growing_with_its_rate
    c = T.classify(points((1..10).map { |k| k * MB }))
    assert_equal :growing, c.kind
    assert c.leak?
    assert_equal 10, c.windows
    assert_in_delta MB, c.rate, 1e-6
    assert_operator c.confidence, :>=, 0.9999997 # 1 - 1/10!
    assert_operator c.low, :<=, c.rate
    assert_operator c.high, :>=, c.rate
  end

  def test_too_few_windows_is_never_growing
    c = T.classify(points((1..7).map { |k| k * MB }))
    refute c.enough
    refute c.leak?
  end

  def test_a_cache_that_fills_then_stops_is_levelling_off_at_every_window
    ys = (0...30).map { |k| [k + 1, 3].min * MB }
    kinds = kinds_over_prefixes(ys, Array.new(30, 0.0))
    refute_includes kinds, :growing
    refute_includes leaks_over_prefixes(ys, Array.new(30, 0.0)), true
    assert_equal :levelling_off, kinds.last
  end

  def test_a_batch_that_builds_and_releases_is_periodic
    ys = (0...30).map { |k| (k % 4 == 3 ? 0 : (k % 4) + 1) * 512 * 1024 }
    kinds = kinds_over_prefixes(ys, Array.new(30, 0.0))
    refute_includes kinds, :growing
    assert_equal :periodic, kinds.last
  end

  def test_growth_after_the_last_release_is_judged_alone
    ys = [1, 2, 3, 4, 0.1] + (1..10).map { |k| k * 2 }
    c = T.classify(points(ys.map { |v| v * MB }))
    assert c.leak?
    assert_equal 10 + 1, c.windows # from the release on
    assert_equal 1, c.releases
  end

  # Growth that the recent windows neither confirm nor contradict (a lumpy
  # sampled series) is shown growing, without a leak verdict.
  def test_growing_without_a_verdict_until_the_recent_windows_confirm
    ys = [0.2, 0.5, 0.8, 1.0, 1.4, 1.5, 3.2, 4.1, 4.2, 4.2, 4.3, 4.3, 4.4, 4.5, 4.6, 4.6, 4.7, 5.3, 5.3, 5.5].map { |v| v * MB }
    c = T.classify(points(ys, 25_000))
    assert_equal :growing, c.kind
    refute c.leak?
    assert_operator c.recent_z, :<, 6
  end

  def test_a_growth_below_the_thresholds_is_not_a_leak
    c = T.classify(points((1..20).map { |k| k * 1024 }), heap_bytes: 100 * MB)
    assert_equal :flat, c.kind, "20 kB over 20 windows in a 100 MB heap"
  end

  def test_a_slowing_growth_is_levelling_off
    ys = (1..30).map { |k| Math.sqrt(k) * 4 * MB + (k > 20 ? 0 : 0) }
    ys = ys.each_with_index.map { |v, i| i < 15 ? v : ys[14] + (i - 14) * 0.01 * MB }
    assert_equal :levelling_off, T.classify(points(ys)).kind
  end

  # ---- sampled series

  # A site as the sampler sees it: `alive` objects of `size` bytes, each
  # sampled with probability q when allocated (so a sample stands for
  # size/q bytes); each window a fraction `turnover` of them dies and as
  # many new ones are allocated, plus `growth` new ones that stay. The
  # estimate's errors are correlated from window to window: a sample stays
  # until its object dies.
  def sampled_series(rng, windows:, alive:, q:, turnover:, growth: 0, size: 1000)
    sampled = binomial(rng, alive, q)
    live = alive
    ys = []
    windows.times do
      dying = binomial(rng, sampled, turnover)
      sampled += binomial(rng, (live * turnover).round, q) - dying
      sampled += binomial(rng, growth, q)
      live += growth
      ys << sampled * size / q
    end
    [ys, Array.new(windows, size / q)]
  end

  def binomial(rng, n, p)
    n.times.count { rng.rand < p }
  end

  # The trap the sampling gate is for: an LRU-like site (objects living ten
  # windows) sampled at ~50 live samples drifts for many windows, and a
  # rank test alone calls some of those drifts a trend at p <= 0.001. With
  # each window's uncertainty counted, no prefix of any of the 300 series
  # is called a leak.
  def test_a_noisy_flat_sampled_series_is_never_a_leak
    rng = Random.new(45)
    mk_alone = 0
    300.times do
      ys, bs = sampled_series(rng, windows: 30, alive: 1000, q: 0.05, turnover: 0.1)
      refute_includes leaks_over_prefixes(ys, bs), true, "a flat site sampled with ~50 live samples: #{ys.inspect}"
      mk_alone += 1 if Fathom::Leaks::MannKendall.test(ys).p_increasing <= 1e-3
    end
    assert_operator mk_alone, :>, 0, "the rank test alone should be fooled by some correlated drifts"
  end

  # A leak of 1,000 objects a window sampled at 10% (about 100 new samples
  # a window) among a flat population: found within 10 windows in each of
  # the 100 series. (At half that density the recent half's gate, 6
  # standard deviations over 4 windows, needs a window or two more: the
  # price of never calling a noisy flat series a leak.)
  def test_a_sampled_leak_is_found_within_ten_windows
    rng = Random.new(4545)
    100.times do
      ys, bs = sampled_series(rng, windows: 10, alive: 1000, q: 0.1, turnover: 0.1, growth: 1000)
      assert leaks_over_prefixes(ys, bs).last, ys.inspect
    end
  end

  # A window with no sample of a site is uncertain by one sample's worth,
  # not exactly zero: a site of a few samples that comes and goes is flat.
  def test_a_site_of_a_few_samples_is_flat
    rng = Random.new(7)
    50.times do
      ys, bs = sampled_series(rng, windows: 30, alive: 40, q: 0.05, turnover: 0.3)
      refute_includes leaks_over_prefixes(ys, bs), true, ys.inspect
    end
  end
end
