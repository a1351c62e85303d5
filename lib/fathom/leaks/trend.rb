# frozen_string_literal: true

require_relative "normal"
require_relative "mann_kendall"
require_relative "theil_sen"
require_relative "rules"

module Fathom
  module Leaks
    # Classifies one series of in-use bytes (one value per window) as
    #
    #   :growing        it rises over the segment; a leak (leak?) once the
    #                   recent windows confirm it still rises at its end
    #   :levelling_off  it rose, and has stopped (a cache warming up, a
    #                   bounded cache full)
    #   :periodic       it builds and gives back, twice or more (a batch)
    #   :flat           none of these
    #
    # Two kinds of noise move a window's value, and each test answers one:
    #
    # - The program's own: what a GC left unswept at the flush, the work a
    #   window happened to hold. Mann–Kendall (rank order, p-value from the
    #   permutations) and the Theil–Sen slope's interval treat it, assuming
    #   it is independent from window to window, and the gate below adds
    #   its scatter (the residuals' around the line, beyond what sampling
    #   alone scatters) to the variance of the rise.
    # - The sampling's: a sampled site's bytes are n samples times their
    #   weights, uncertain by about value/sqrt(n) (exact mode: none). Those
    #   errors are *not* independent across windows (a live sample stays in
    #   every window until its object dies), so a noisy flat series can drift
    #   for many windows and pass a rank test. The sampling gate answers it
    #   with the windows' own uncertainty, not the scatter: the rise from the
    #   first quarter of the segment to the last must be `z` standard
    #   deviations of the difference, computed as if the windows inside each
    #   quarter were perfectly correlated (no averaging down) and taking the
    #   larger of the plug-in variance and the variance a flat series of the
    #   pooled level would have (the score form, which does not shrink when
    #   a quarter happens to hold few samples).
    #
    # A window's sampling uncertainty comes in as `bytes_per_sample` (the
    # site's value over its inuse_samples; a site with no sample that window
    # gets one sample's worth, the profile's average): var = value x bytes
    # per sample, the variance of a Poisson count of samples of equal weight.
    module Trend
      Points = Struct.new(:t, :y, :b) # window end (seconds), bytes, bytes per sample (0: exact)

      # kind: as above. windows: the segment's length (after the last
      # release); enough: whether it reached min_windows. rate, low, high:
      # bytes per second (Theil–Sen, interval widened by the sampling),
      # growth: bytes over the segment, confidence: 1 - the larger p-value
      # of the growth tests, releases: falls seen, material: growth above
      # the thresholds.
      # reason: why a growing series is not (yet) a leak: :recent (its last
      # windows do not confirm it), :major_gc (no major GC ran since it
      # began: what it holds may be dead objects of the old generation).
      Classification = Struct.new(:kind, :windows, :first, :enough, :rate, :low, :high, :growth, :confidence,
                                  :p_trend, :z, :releases, :material, :recent_rate, :leak, :recent_z, :reason,
                                  keyword_init: true) do
        def growing?
          kind == :growing
        end

        # A leak verdict: growing, and the recent windows confirm it beyond
        # both noises. Growing without it is "not yet confident".
        def leak?
          leak == true
        end
      end

      # How many standard deviations of the recent windows' noise their rise
      # must fall short of the whole segment's pace to call it levelling
      # off; less evidence either way leaves it growing, not yet a leak.
      LEVELLED_Z = 2.0

      Test = Struct.new(:fit, :mk, :z, :z_sampling, :p_gate, :rise, :sigma_rise, :span, keyword_init: true) do
        def p
          [mk.p_increasing, p_gate].max
        end
      end

      SEN_CONFIDENCE = 0.95
      MAD_SCALE = 1.4826

      module_function

      # points: Points; heap_bytes: the heap the growth is measured against
      # (min_share); rules: Rules. major_gcs: Ruby's major GC count at each
      # window (nil, or nil entries, where unknown): a leak must have grown
      # across at least one major GC, since until one runs the objects of
      # the old generation that died are still counted in use (a batch's
      # structure dropped after it aged looks like growth until then).
      def classify(points, rules: Rules.new, heap_bytes: 0, major_gcs: nil)
        # The tests run on the window's number, not its time: a late flush
        # or a slow stretch of the machine moves a window in time, not what
        # the program did in it. Rates are then per second of the average
        # window (what FATHOM_EVERY makes them, when the flusher keeps time).
        per_window = points.t.size > 1 ? (points.t.last - points.t.first) / (points.t.size - 1) : 0.0
        per_window = 1.0 unless per_window.positive?
        t = Array.new(points.t.size) { |i| i.to_f }
        y = points.y.map(&:to_f)
        b = points.b.map(&:to_f)
        n = y.size
        threshold = [rules.min_bytes, rules.min_share * heap_bytes].max
        releases = releases(y, b, rules, threshold)
        first = releases.last || 0
        m = n - first
        base = { windows: m, first: first, releases: releases.size, enough: m >= rules.min_windows }
        # One release and no other is a structure that went away (a thread
        # that ended), not a cycle: periodic takes two.
        cyclic = releases.size >= 2
        if m < 2
          kind = cyclic ? :periodic : :flat
          return Classification.new(kind: kind, rate: 0.0, low: 0.0, high: 0.0, growth: 0.0, confidence: 0.0,
                                    p_trend: 1.0, z: 0.0, material: false, recent_rate: 0.0, leak: false, recent_z: 0.0,
                                    **base)
        end

        ts = t[first..]
        ys = y[first..]
        bs = b[first..]
        # Most sites are flat: what can be neither growing nor levelling off
        # (its rise too small, or within the sampling noise alone) is told
        # in O(n), without the O(n^2) rank tests.
        if !cyclic && quickly_flat?(ys, bs, threshold, rules)
          rate = (ys.last - ys.first) / [ts.last - ts.first, 1.0].max / per_window
          return Classification.new(kind: :flat, rate: rate, low: rate, high: rate, growth: ys.last - ys.first,
                                    confidence: 0.0, p_trend: 1.0, z: 0.0, material: false, recent_rate: 0.0,
                                    leak: false, recent_z: 0.0, **base)
        end

        whole = growth_test(ts, ys, bs)
        low, high = rate_interval(whole)
        growth = whole.fit.slope * (ts.last - ts.first)
        material = growth >= threshold
        significant = base[:enough] && whole.mk.p_increasing <= rules.alpha && whole.z >= rules.z && whole.fit.low.positive?
        # It rose beyond both noises, but not as a steady trend over the
        # whole segment (a long flat stretch after the rise): levelling off.
        rose = whole.rise >= threshold && whole.z_sampling >= rules.z && whole.mk.p_increasing <= rules.recent_alpha
        recent_rate = 0.0
        recent_z = 0.0
        leak = false
        reason = nil
        kind =
          if significant && material
            r = [5, (m + 1) / 2].max.clamp(2, m)
            recent = growth_test(ts.last(r), ys.last(r), bs.last(r))
            recent_rate = recent.fit.slope
            recent_z = recent.z
            confirmed = recent.mk.p_increasing <= rules.recent_alpha && recent.z >= rules.z &&
                        recent.fit.slope >= rules.levelling * whole.fit.slope
            survived = survived_major_gc?(major_gcs, first)
            leak = confirmed && survived
            reason = (:recent unless confirmed) || (:major_gc unless survived)
            # The recent windows rose by clearly less than the whole
            # segment's pace predicts: levelling off. Neither clearly on
            # pace nor clearly behind: growing, not yet a verdict.
            pace = rules.levelling * whole.fit.slope * recent.span
            slowed = recent.rise < pace && pace - recent.rise >= LEVELLED_Z * recent.sigma_rise
            confirmed || !slowed ? :growing : :levelling_off
          elsif rose
            :levelling_off
          elsif cyclic
            :periodic
          else
            :flat
          end
        Classification.new(kind: kind, rate: whole.fit.slope / per_window, low: low / per_window,
                           high: high / per_window, growth: growth, confidence: 1.0 - whole.p,
                           p_trend: whole.mk.p_increasing, z: whole.z, material: material,
                           recent_rate: recent_rate / per_window, leak: leak, recent_z: recent_z,
                           reason: (reason if kind == :growing), **base)
      end

      # Whether Ruby ran a major GC between the segment's first window and
      # its last (true when the windows do not say).
      def survived_major_gc?(major_gcs, first)
        return true if major_gcs.nil?

        counts = major_gcs[first..]
        return true if counts.nil? || counts.empty? || counts.any?(&:nil?)

        counts.last > counts.first
      end

      # Whether the rise from the first quarter to the last is below half
      # the material threshold (a linear rise is 3/4 or more of the
      # segment's growth), or within the sampling noise alone (the whole
      # test's z only adds the program's scatter to the variance).
      def quickly_flat?(ys, bs, threshold, rules)
        m = ys.size
        k = [m / 4, 1].max
        head = 0...k
        tail = (m - k)...m
        rise = (tail.sum { |i| ys[i] } - head.sum { |i| ys[i] }) / k
        return true if rise < 0.5 * threshold

        sig_first = head.sum { |i| sigma(ys[i], bs[i]) } / k
        sig_last = tail.sum { |i| sigma(ys[i], bs[i]) } / k
        level = [(head.sum { |i| ys[i] } + tail.sum { |i| ys[i] }) / (2.0 * k), 0.0].max
        score = level * (head.sum { |i| bs[i] } + tail.sum { |i| bs[i] }) / k
        ratio(rise, [sig_first**2 + sig_last**2, score].max) < rules.z
      end

      # Indices where the series fell to below `release` of its running
      # peak, by more than z sampling standard deviations and by at least
      # `threshold` bytes (what a leak must grow by: a few hundred bytes
      # coming and going is flat): it built and gave back. The peak starts
      # over at each release.
      def releases(y, b, rules, threshold = 0.0)
        found = []
        peak = y.first || 0.0
        peak_i = 0
        (1...y.size).each do |i|
          if y[i] > peak
            peak = y[i]
            peak_i = i
            next
          end
          drop = peak - y[i]
          next unless drop >= rules.release * peak && drop.positive? && drop >= threshold

          sigma = Math.sqrt(sigma(y[peak_i], b[peak_i])**2 + sigma(y[i], b[i])**2)
          next unless drop > rules.z * sigma

          found << i
          peak = y[i]
          peak_i = i
        end
        found
      end

      # The trend tests of one stretch of windows.
      def growth_test(ts, ys, bs)
        m = ys.size
        fit = TheilSen.fit(ts, ys, confidence: SEN_CONFIDENCE)
        mk = MannKendall.test(ys)
        k = [m / 4, 1].max
        head = 0...k
        tail = (m - k)...m
        mean = ->(a, r) { r.sum { |i| a[i] }.fdiv(r.size) }
        level_first = mean.call(ys, head)
        level_last = mean.call(ys, tail)
        sig_first = head.sum { |i| sigma(ys[i], bs[i]) } / k
        sig_last = tail.sum { |i| sigma(ys[i], bs[i]) } / k
        plug_in = sig_first**2 + sig_last**2
        pooled = [(level_first + level_last) / 2.0, 0.0].max
        score = pooled * (mean.call(bs, head) + mean.call(bs, tail))
        # The program's own scatter: the residuals' spread around the line
        # (MAD, scaled to a standard deviation), less what the sampling
        # alone would scatter (it is in `sampling` already).
        residuals = ts.each_index.map { |i| ys[i] - fit.at(ts[i]) }
        spread = MAD_SCALE * TheilSen.median(residuals.map { |r| (r - TheilSen.median(residuals)).abs })
        sampled = ys.each_index.sum { |i| sigma(ys[i], bs[i])**2 } / m
        program = [spread**2 - sampled, 0.0].max
        sampling = [plug_in, score].max
        variance = sampling + 2 * program / k
        rise = level_last - level_first
        span = mean.call(ts, tail) - mean.call(ts, head)
        z = ratio(rise, variance)
        Test.new(fit: fit, mk: mk, z: z, z_sampling: ratio(rise, sampling), p_gate: Normal.upper_tail(z), rise: rise,
                 sigma_rise: Math.sqrt(variance), span: span)
      end

      def ratio(rise, variance)
        if variance.positive? then rise / Math.sqrt(variance)
        elsif rise.positive? then Float::INFINITY
        elsif rise.negative? then -Float::INFINITY
        else 0.0
        end
      end

      # Sen's interval for the slope, widened by the sampling uncertainty
      # of the rise (95%: 1.96 of its standard deviations over the span).
      def rate_interval(test)
        fit = test.fit
        extra = test.span.positive? ? 1.959964 * test.sigma_rise / test.span : 0.0
        low = fit.slope - Math.sqrt((fit.slope - fit.low)**2 + extra**2)
        high = fit.slope + Math.sqrt((fit.high - fit.slope)**2 + extra**2)
        [low, high]
      end

      # A window's sampling standard deviation: value x bytes per sample
      # is the variance of n samples of equal weight; a window with no
      # sample is uncertain by one sample's worth.
      def sigma(value, bytes_per_sample)
        return 0.0 if bytes_per_sample <= 0

        value.positive? ? Math.sqrt(value * bytes_per_sample) : bytes_per_sample
      end
    end
  end
end
