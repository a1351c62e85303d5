# frozen_string_literal: true

module Fathom
  module Report
    # How much a sampled heap estimate can be trusted, from the number of
    # sample records behind it (the alloc_samples / inuse_samples types).
    #
    # Model: samples land on a site like a Poisson process; n observed
    # samples estimate a mean of n. The 95% interval for that mean is
    # Garwood's exact one, [chi2(0.025; 2n) / 2, chi2(0.975; 2n + 2) / 2],
    # here through Byar's approximation (within 1% of it for n >= 5; below
    # that its lower end is lower than the exact one: wider, never narrower). An
    # estimate of n samples × (mean value per sample) then lies within the
    # estimate × [lower / n, upper / n]. This counts only the chance in how
    # many samples a site got; differences between the sizes and weights
    # of a site's samples add to it, so for sites of very mixed sizes the
    # interval is a lower bound on the uncertainty. See
    # docs/internals/heap.md, "Showing the uncertainty". Pure Ruby on purpose: reports read files
    # without the native extension.
    module SampleInterval
      # Fewer samples than this and a row is a guess, not a measurement:
      # at 10 the 95% interval already spans 0.48x..1.84x of the estimate.
      MIN_SAMPLES = 10
      Z = 1.959964 # 97.5% quantile of the normal distribution

      module_function

      # [low, high] factors for an estimate resting on n samples.
      def factors(n)
        raise ArgumentError, "fathom: a sample count must be a non-negative Integer, got #{n.inspect}" unless Integer === n && n >= 0
        return [0.0, Float::INFINITY] if n.zero?

        low = n * (1 - 1.0 / (9 * n) - Z / (3 * Math.sqrt(n)))**3
        m = n + 1
        high = m * (1 - 1.0 / (9 * m) + Z / (3 * Math.sqrt(m)))**3
        [low.clamp(0.0, n.to_f) / n, high / n]
      end

      def few?(n)
        n < MIN_SAMPLES
      end

      # The sample-count type that stands behind a value type among a
      # profile's sample type names, or nil (exact-mode and older profiles,
      # other types). A count is named for the types it stands behind, as
      # the heap schema has it (ext/fathom/core/heap/heap_schema.h, and the
      # profile's "Samples: N behind alloc_*" comment): alloc_samples stands
      # behind every other alloc_ type, inuse_samples behind the inuse_ ones.
      def count_type(sample_type, names)
        prefix = sample_type[/\A[a-z]+_/] or return nil
        count = "#{prefix}samples"
        count if count != sample_type && names.include?(count)
      end
    end
  end
end
