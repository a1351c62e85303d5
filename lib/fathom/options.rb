# frozen_string_literal: true

module Fathom
  # Validation of user-supplied options. Every public entry point (profilers,
  # the flusher, Fathom.profile, the CLI, autorun's environment variables)
  # goes through these helpers so that bad input always ends as:
  #   TypeError     when the value has the wrong type,
  #   ArgumentError when it has the right type but a wrong value / is unknown,
  # with a message that starts with "fathom:" and names the option.
  module Options
    NS_PER_UNIT = { "ns" => 1, "us" => 1_000, "µs" => 1_000, "ms" => 1_000_000, "s" => 1_000_000_000 }.freeze
    DURATION_RE = /\A\s*(\d+(?:\.\d*)?|\.\d+)(?:e([-+]?\d+))?\s*(ns|us|µs|ms|s)?\s*\z/.freeze
    DURATION_HINT = 'a positive duration in seconds (Float/Integer) or a String like "1ms"'

    # Limits shared by the profilers, the CLI and autorun. Below 10us each
    # tick (a signal, a postponed job, a hook install) costs more than the
    # interval; an hour is a typo guard (and keeps the nanoseconds far
    # inside the native int64). The extension checks the same lower bound.
    SAMPLING_INTERVAL_NS = (10_000..3_600_000_000_000).freeze
    MAX_DEPTH_RANGE = (1..4096).freeze

    module_function

    # Raises ArgumentError when `given` (a Hash of keyword options) has keys
    # outside `known`. `where` names the method for the message.
    def check_unknown!(given, known, where)
      unknown = given.keys - known
      return if unknown.empty?

      raise ArgumentError, "fathom: unknown option#{"s" if unknown.size > 1} " \
                           "#{unknown.map(&:inspect).join(", ")} for #{where} " \
                           "(known: #{known.map(&:to_s).join(", ")})"
    end

    # A duration: Numeric seconds (Integer/Float/Rational) or a String with a
    # unit ("500us", "1ms", "2.5s", "100ns"; a bare number is seconds).
    # Returns whole nanoseconds (at least 1). `min_ns`/`max_ns` bound it.
    def duration_ns(name, value, min_ns: 1, max_ns: nil)
      ns =
        case value
        when Integer, Float, Rational
          seconds_to_ns(name, value)
        when String
          parse_duration_string(name, value)
        else
          raise TypeError, "fathom: #{name} must be #{DURATION_HINT}, got #{describe(value)}"
        end
      if ns < min_ns || (max_ns && ns > max_ns)
        raise ArgumentError, "fathom: #{name} must be between #{format_ns(min_ns)} and " \
                             "#{max_ns ? format_ns(max_ns) : "any length"}, got #{value.inspect}"
      end
      ns
    end

    # The same, in (Float) seconds.
    def duration(name, value, **bounds)
      duration_ns(name, value, **bounds) / 1e9
    end

    def boolean(name, value)
      return value if value == true || value == false

      raise TypeError, "fathom: #{name} must be true or false, got #{describe(value)}"
    end

    def integer(name, value, range)
      raise TypeError, "fathom: #{name} must be an Integer, got #{describe(value)}" unless value.is_a?(Integer)
      raise ArgumentError, "fathom: #{name} must be in #{range_text(range)}, got #{value}" unless range.cover?(value)

      value
    end

    # A Symbol (or String) from `allowed` (Symbols); returns the Symbol.
    def one_of(name, value, allowed)
      unless value.is_a?(Symbol) || value.is_a?(String)
        raise TypeError, "fathom: #{name} must be a Symbol, one of #{allowed.map(&:inspect).join(", ")}; got #{describe(value)}"
      end

      sym = value.to_sym
      return sym if allowed.include?(sym)

      raise ArgumentError, "fathom: #{name} must be one of #{allowed.map(&:inspect).join(", ")}, got #{value.inspect}"
    end

    # A String (or Pathname) naming a file or directory.
    def path(name, value)
      value = value.to_path if value.respond_to?(:to_path)
      raise TypeError, "fathom: #{name} must be a String path, got #{describe(value)}" unless value.is_a?(String)
      raise ArgumentError, "fathom: #{name} must not be empty" if value.empty?

      value
    end

    # Parsers for the string form of options (environment variables, CLI).
    def parse_boolean(name, text)
      case text.to_s.strip.downcase
      when "1", "true", "yes", "on" then true
      when "0", "false", "no", "off", "" then false
      else raise ArgumentError, "fathom: #{name} must be true/false (or 1/0), got #{text.inspect}"
      end
    end

    def parse_integer(name, text, range)
      value = Integer(text.to_s.strip, 10)
    rescue ArgumentError
      raise ArgumentError, "fathom: #{name} must be an integer in #{range_text(range)}, got #{text.inspect}"
    else
      integer(name, value, range)
    end

    # "1.50ms"-style rendering of nanoseconds, for messages.
    def format_ns(ns)
      unit, factor = [["s", 1_000_000_000], ["ms", 1_000_000], ["us", 1_000]].find { |_, f| ns >= f } || ["ns", 1]
      text = format("%.3f", ns.to_f / factor).sub(/\.?0+\z/, "")
      "#{text}#{unit}"
    end

    def seconds_to_ns(name, seconds)
      if seconds.is_a?(Float) && !seconds.finite? || seconds <= 0
        raise ArgumentError, "fathom: #{name} must be #{DURATION_HINT}, got #{seconds.inspect}"
      end

      [(seconds * 1_000_000_000).round, 1].max
    end

    def parse_duration_string(name, text)
      m = DURATION_RE.match(text)
      raise ArgumentError, "fathom: #{name} must be #{DURATION_HINT}, got #{text.inspect}" unless m

      # Rational keeps "0.1ms" exact (Float would give 99999.99...).
      number = Rational(m[1].end_with?(".") ? m[1].chop : m[1])
      number *= Rational(10)**Integer(m[2], 10) if m[2]
      ns = number * NS_PER_UNIT.fetch(m[3] || "s")
      raise ArgumentError, "fathom: #{name} must be #{DURATION_HINT}, got #{text.inspect}" if ns <= 0

      [ns.round, 1].max
    end

    def range_text(range)
      range.end ? "#{range.begin}..#{range.end}" : ">= #{range.begin}"
    end

    def describe(value)
      "#{value.inspect} (#{value.class})"
    end

    private_class_method :seconds_to_ns, :parse_duration_string, :range_text, :describe
  end
end
