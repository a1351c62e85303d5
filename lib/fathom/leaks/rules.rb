# frozen_string_literal: true

require_relative "../options"

module Fathom
  module Leaks
    # The thresholds of a verdict (Trend), checked like every other option:
    # ArgumentError/TypeError naming the option.
    #
    #   min_windows   windows a series needs before it can be called growing
    #                 (default 8: 8 strictly rising windows have a
    #                 Mann–Kendall p of 1/8! = 2.5e-5)
    #   alpha         the Mann–Kendall p-value the whole segment must reach
    #                 (default 0.001): the test of the program's own noise
    #   recent_alpha  the same for the recent half (default 0.05): a cache
    #                 that stopped growing is levelling off, not leaking
    #   z             the sampling gate: the rise from the first quarter of
    #                 the windows to the last must be this many standard
    #                 deviations of the windows' sampling uncertainty
    #                 (default 6: a one-sided normal tail of 1e-9; with 20
    #                 sites checked at 30 windows each, under 1e-6 per run
    #                 by the union bound)
    #   release       a fall to below this fraction of the running peak,
    #                 beyond sampling noise, is a release (default 0.5): the
    #                 series builds and gives back (periodic), and only what
    #                 follows the last release can be a leak
    #   min_bytes     growth over the segment below this is not a leak,
    #                 however steady (default 64 KiB)
    #   min_share     nor below this share of the heap (default 0.005)
    #   levelling     the recent slope must be at least this share of the
    #                 whole segment's (default 1/3), else levelling off
    class Rules
      DEFAULTS = { min_windows: 8, alpha: 1e-3, recent_alpha: 0.05, z: 6.0, release: 0.5,
                   min_bytes: 64 << 10, min_share: 0.005, levelling: 1.0 / 3 }.freeze
      MIN_WINDOWS_RANGE = (4..10_000).freeze

      attr_reader(*DEFAULTS.keys)

      def initialize(**opts)
        Options.check_unknown!(opts, DEFAULTS.keys, "Fathom::Leaks::Rules.new")
        opts = DEFAULTS.merge(opts)
        @min_windows = Options.integer("min_windows", opts[:min_windows], MIN_WINDOWS_RANGE)
        @alpha = probability("alpha", opts[:alpha])
        @recent_alpha = probability("recent_alpha", opts[:recent_alpha])
        @z = number("z", opts[:z], 0.0..40.0)
        @release = number("release", opts[:release], 0.01..1.0)
        @min_bytes = number("min_bytes", opts[:min_bytes], 0.0..Float::INFINITY)
        @min_share = number("min_share", opts[:min_share], 0.0..1.0)
        @levelling = number("levelling", opts[:levelling], 0.0..1.0)
        freeze
      end

      def to_h
        DEFAULTS.keys.to_h { |k| [k, public_send(k)] }
      end

      private

      def probability(name, value)
        v = number(name, value, 0.0..1.0)
        raise ArgumentError, "fathom: #{name} must be above 0 and below 1, got #{value.inspect}" unless v.positive? && v < 1

        v
      end

      def number(name, value, range)
        raise TypeError, "fathom: #{name} must be a number, got #{Options.describe(value)}" unless Numeric === value && value.real?

        v = value.to_f
        raise ArgumentError, "fathom: #{name} must be within #{range.begin}..#{range.end}, got #{value.inspect}" unless v.finite? || v == Float::INFINITY
        raise ArgumentError, "fathom: #{name} must be within #{range.begin}..#{range.end}, got #{value.inspect}" unless range.cover?(v)

        v
      end
    end
  end
end
