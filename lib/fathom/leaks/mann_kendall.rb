# frozen_string_literal: true

require_relative "normal"

module Fathom
  module Leaks
    # The Mann–Kendall test for a monotone trend in a series (one value per
    # window, in time order): S counts the pairs i < j where the later value
    # is higher, minus those where it is lower. Under "no trend" (the
    # values exchangeable: independent, identically distributed noise)
    # every order is equally likely, so S's distribution is known without
    # assuming a shape for the noise.
    #
    # p_increasing is P(S' >= S) under that hypothesis: one-sided, since a
    # leak only grows. Without ties and for n <= EXACT_MAX it is exact,
    # from the count of permutations with k inversions (Mahonian numbers:
    # S = N - 2 * inversions, N = n(n-1)/2); otherwise the normal
    # approximation with the variance corrected for ties and a continuity
    # correction (Kendall 1975). Exactness matters at the tail a leak
    # verdict reads: 10 strictly rising windows have p = 1/10! = 2.8e-7,
    # where the normal approximation says 5e-5.
    #
    # What the test does not cover: noise correlated from window to window
    # (a sampled site's estimate is: the same live samples stay in every
    # window until their objects die). That is the sampling gate's job
    # (Trend), which compares the rise with each window's sampling
    # uncertainty instead of with the scatter.
    module MannKendall
      Result = Struct.new(:n, :s, :variance, :z, :p_increasing, :exact, keyword_init: true)
      EXACT_MAX = 40

      module_function

      def test(values)
        ys = values.map(&:to_f)
        n = ys.size
        return Result.new(n: n, s: 0, variance: 0.0, z: 0.0, p_increasing: 1.0, exact: true) if n < 2

        s = 0
        (0...n - 1).each do |i|
          yi = ys[i]
          (i + 1...n).each { |j| s += (ys[j] <=> yi) }
        end
        ties = ys.tally.values.select { |t| t > 1 }
        variance = (n * (n - 1) * (2 * n + 5) - ties.sum { |t| t * (t - 1) * (2 * t + 5) }) / 18.0
        if ties.empty? && n <= EXACT_MAX
          p = exact_upper(n, s)
          z = variance.positive? ? (s - (s <=> 0)) / Math.sqrt(variance) : 0.0
          return Result.new(n: n, s: s, variance: variance, z: z, p_increasing: p, exact: true)
        end
        z = variance.positive? ? (s - (s <=> 0)) / Math.sqrt(variance) : 0.0
        p = variance.positive? ? Normal.upper_tail(z) : (s.positive? ? 0.0 : 1.0)
        Result.new(n: n, s: s, variance: variance, z: z, p_increasing: p, exact: false)
      end

      # P(S' >= s) for n distinct values in random order.
      def exact_upper(n, s)
        total = n * (n - 1) / 2
        return 1.0 if s <= -total
        return 0.0 if s > total

        max_inversions = (total - s) / 2 # S' >= s  <=>  inversions <= (N - s) / 2
        row = mahonian(n)
        count = row[0..max_inversions].sum
        Rational(count, factorial(n)).to_f
      end

      # Permutations of n elements by their number of inversions, k = 0..N.
      def mahonian(n)
        @mahonian ||= { 1 => [1] }
        @mahonian[n] ||= begin
          prev = mahonian(n - 1)
          size = n * (n - 1) / 2 + 1
          prefix = [0]
          prev.each { |c| prefix << prefix.last + c }
          Array.new(size) do |k|
            low = [k - (n - 1), 0].max
            high = [k, prev.size - 1].min
            high < low ? 0 : prefix[high + 1] - prefix[low]
          end.freeze
        end
      end

      def factorial(n)
        (1..n).reduce(1, :*)
      end
    end
  end
end
