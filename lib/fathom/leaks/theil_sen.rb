# frozen_string_literal: true

require_relative "normal"
require_relative "mann_kendall"

module Fathom
  module Leaks
    # The Theil–Sen line through (x, y) points: its slope is the median of
    # the slopes of every pair of points, so one wild window (a GC that ran
    # just before a flush, a batch caught half built) cannot tilt it, as it
    # would a least-squares line (breakdown point 29%). The interval is
    # Sen's (1968): the ranks of the ordered pairwise slopes that bound the
    # slope at `confidence`, from the variance of Kendall's S (ties
    # corrected). Like Mann–Kendall it assumes the scatter is independent
    # from window to window; Trend widens it by the sampling uncertainty.
    module TheilSen
      Fit = Struct.new(:slope, :intercept, :low, :high, :n, keyword_init: true) do
        # The fitted value at x.
        def at(x)
          intercept + slope * x
        end
      end

      module_function

      def fit(xs, ys, confidence: 0.95)
        raise ArgumentError, "fathom: x and y must have the same length" unless xs.size == ys.size

        n = xs.size
        slopes = []
        (0...n - 1).each do |i|
          (i + 1...n).each do |j|
            dx = xs[j] - xs[i]
            slopes << (ys[j] - ys[i]).fdiv(dx) unless dx.zero?
          end
        end
        if slopes.empty?
          level = n.zero? ? 0.0 : median(ys.map(&:to_f))
          return Fit.new(slope: 0.0, intercept: level, low: 0.0, high: 0.0, n: n)
        end

        slopes.sort!
        slope = median_sorted(slopes)
        intercept = median(xs.each_index.map { |i| ys[i] - slope * xs[i] })
        low, high = interval(slopes, MannKendall.test(ys).variance, confidence)
        Fit.new(slope: slope, intercept: intercept, low: low, high: high, n: n)
      end

      # Sen's bounds: with N ordered slopes and C = z * sqrt(Var S), the
      # lower bound is the ((N - C) / 2)-th slope and the upper the
      # ((N + C) / 2 + 1)-th (1-based), clamped to the slopes there are.
      def interval(sorted, variance, confidence)
        n = sorted.size
        c = Normal.quantile(1 - (1 - confidence) / 2.0) * Math.sqrt([variance, 0.0].max)
        lower = ((n - c) / 2.0).floor.clamp(1, n)
        upper = ((n + c) / 2.0).ceil.+(1).clamp(1, n)
        [sorted[lower - 1], sorted[upper - 1]]
      end

      def median(values)
        median_sorted(values.sort)
      end

      def median_sorted(sorted)
        return 0.0 if sorted.empty?

        mid = sorted.size / 2
        sorted.size.odd? ? sorted[mid].to_f : (sorted[mid - 1] + sorted[mid]) / 2.0
      end
    end
  end
end
