# frozen_string_literal: true

module Fathom
  module Leaks
    # The standard normal distribution: the tail the trend tests read their
    # p-values from, and the quantile their intervals need. Pure Ruby
    # (Math.erfc), no native extension: `fathom leaks` reads files anywhere.
    module Normal
      module_function

      # P(Z >= z).
      def upper_tail(z)
        return 0.0 if z == Float::INFINITY
        return 1.0 if z == -Float::INFINITY

        0.5 * Math.erfc(z / Math.sqrt(2.0))
      end

      # The z with P(Z <= z) = p, for 0 < p < 1 (Acklam's rational
      # approximation, relative error below 1.2e-9, refined by one Newton
      # step on erfc).
      def quantile(p)
        raise ArgumentError, "fathom: a probability must be strictly between 0 and 1, got #{p.inspect}" unless p.is_a?(Numeric) && p > 0 && p < 1

        z = acklam(p.to_f)
        # One Halley step: e = Phi(z) - p.
        e = 0.5 * Math.erfc(-z / Math.sqrt(2.0)) - p
        u = e * Math.sqrt(2 * Math::PI) * Math.exp(z * z / 2)
        z - u / (1 + z * u / 2)
      end

      A = [-3.969683028665376e+01, 2.209460984245205e+02, -2.759285104469687e+02,
           1.383577518672690e+02, -3.066479806614716e+01, 2.506628277459239e+00].freeze
      B = [-5.447609879822406e+01, 1.615858368580409e+02, -1.556989798598866e+02,
           6.680131188771972e+01, -1.328068155288572e+01].freeze
      C = [-7.784894002430293e-03, -3.223964580411365e-01, -2.400758277161838e+00,
           -2.549732539343734e+00, 4.374664141464968e+00, 2.938163982698783e+00].freeze
      D = [7.784695709041462e-03, 3.224671290700398e-01, 2.445134137142996e+00, 3.754408661907416e+00].freeze
      LOW = 0.02425

      def acklam(p)
        if p < LOW
          q = Math.sqrt(-2 * Math.log(p))
          (((((C[0] * q + C[1]) * q + C[2]) * q + C[3]) * q + C[4]) * q + C[5]) /
            ((((D[0] * q + D[1]) * q + D[2]) * q + D[3]) * q + 1)
        elsif p > 1 - LOW
          -acklam(1 - p)
        else
          q = p - 0.5
          r = q * q
          (((((A[0] * r + A[1]) * r + A[2]) * r + A[3]) * r + A[4]) * r + A[5]) * q /
            (((((B[0] * r + B[1]) * r + B[2]) * r + B[3]) * r + B[4]) * r + 1)
        end
      end
    end
  end
end
