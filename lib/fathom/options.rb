# frozen_string_literal: true

module Fathom
  # Validation of user-supplied options. Every public entry point (profilers,
  # the flusher, Fathom.profile, the CLI, autorun's environment variables)
  # goes through these helpers so that bad input always ends as:
  #   TypeError     when the value has the wrong type,
  #   ArgumentError when it has the right type but a wrong value / is unknown,
  # with a message that starts with "fathom:" and names the option.
  module Options
    NS_PER_UNIT = { "ns" => 1, "us" => 1_000, "µs" => 1_000, "ms" => 1_000_000, "s" => 1_000_000_000,
                    "m" => 60_000_000_000, "min" => 60_000_000_000, "h" => 3_600_000_000_000 }.freeze
    DURATION_RE = /\A\s*(\d+(?:\.\d*)?|\.\d+)(?:e([-+]?\d+))?\s*(ns|us|µs|ms|min|s|m|h)?\s*\z/.freeze
    DURATION_HINT = 'a positive duration in seconds (Float/Integer) or a String like "1ms"'

    # Limits shared by the profilers, the CLI, autorun and the Rack
    # endpoints, each written here only: the native collectors take the
    # values checked here, by keyword (ext/fathom/ruby/keywords.h).
    # Below 10us each tick (a signal, a postponed job, a hook install) costs
    # more than the interval; an hour is a typo guard (and keeps the
    # nanoseconds far inside the native int64).
    SAMPLING_INTERVAL_NS = (10_000..3_600_000_000_000).freeze
    MAX_DEPTH_RANGE = (1..4096).freeze
    # A retention path (a snapshot's or a dump's) keeps at least its root
    # category, a "(… N more)" frame and the object: the encoder refuses
    # less (ext/fathom/core/retention/retention_profile.h), but only after
    # the whole walk.
    RETENTION_DEPTH_RANGE = (3..MAX_DEPTH_RANGE.end).freeze
    # GC coalescing: a window longer than a minute would hide every GC of a
    # short run in one sample.
    COALESCE_NS = (1..60_000_000_000).freeze
    # The longest duration any option takes when it names no maximum of its
    # own: a year. Longer is a typo, and sleeping that long raises
    # RangeError ("out of Time range") inside Ruby.
    DEFAULT_MAX_NS = 365 * 86_400 * 1_000_000_000
    # A duration or integer written as text is at most this long: nothing
    # valid needs more, and parsing a megabyte of digits is not free.
    MAX_TEXT = 64
    # Order of magnitude (in seconds) beyond which a duration string is out
    # of every range without computing it: "1e99999999" must not build
    # 10**99999999 (minutes of CPU, then Infinity).
    MAX_MAGNITUDE = 30
    # More rows than any report has (see row_limit).
    MAX_ROWS = (1 << 31) - 1

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
    # unit ("500us", "1ms", "2.5s", "100ns", "5m" or "5min", "1h"; a bare
    # number is seconds). Each option's range still applies.
    # Returns whole nanoseconds (at least 1). `min_ns`/`max_ns` bound it
    # (max_ns nil: DEFAULT_MAX_NS).
    def duration_ns(name, value, min_ns: 1, max_ns: nil)
      max_ns ||= DEFAULT_MAX_NS
      range_error = lambda do
        raise ArgumentError, "fathom: #{name} must be between #{format_ns(min_ns)} and #{format_ns(max_ns)}, " \
                             "got #{shown(value)}"
      end
      ns =
        case value
        when Integer, Float, Rational
          seconds_to_ns(name, value)
        when String
          parse_duration_string(name, value) or range_error.call
        else
          raise TypeError, "fathom: #{name} must be #{DURATION_HINT}, got #{describe(value)}"
        end
      range_error.call if ns < min_ns || ns > max_ns
      ns
    end

    # The same, in (Float) seconds.
    def duration(name, value, **bounds)
      duration_ns(name, value, **bounds) / 1e9
    end

    # A heap or CPU/wall sampling interval (a duration in
    # SAMPLING_INTERVAL_NS), in whole nanoseconds.
    def sampling_interval_ns(name, value)
      duration_ns(name, value, min_ns: SAMPLING_INTERVAL_NS.begin, max_ns: SAMPLING_INTERVAL_NS.end)
    end

    def boolean(name, value)
      return value if value == true || value == false

      raise TypeError, "fathom: #{name} must be true or false, got #{describe(value)}"
    end

    # Checks are written `Integer === value`, not `value.is_a?(Integer)`: a
    # BasicObject has no is_a? and must get the TypeError, not NoMethodError.
    def integer(name, value, range)
      raise TypeError, "fathom: #{name} must be an Integer, got #{describe(value)}" unless Integer === value
      raise ArgumentError, "fathom: #{name} must be #{range.end ? range_text(range) : "at least #{range.begin}"}, got #{shown(value)}" unless range.cover?(value)

      value
    end

    # A Symbol (or String) from `allowed` (Symbols); returns the Symbol.
    # Compared as text: String#to_sym raises EncodingError on invalid bytes.
    def one_of(name, value, allowed)
      unless Symbol === value || String === value
        raise TypeError, "fathom: #{name} must be a Symbol, one of #{allowed.map(&:inspect).join(", ")}; got #{describe(value)}"
      end

      text = value.to_s
      found = allowed.find { |a| a.to_s == text }
      return found if found

      raise ArgumentError, "fathom: #{name} must be one of #{allowed.map(&:inspect).join(", ")}, got #{shown(value)}"
    end

    # A String (or Pathname) naming a file or directory. Refused here, with
    # the option's name, rather than deep in File: a NUL byte, and a "~user"
    # prefix naming no user (File.expand_path raises on both).
    def path(name, value)
      value = value.to_path if responds_to?(value, :to_path)
      raise TypeError, "fathom: #{name} must be a String path, got #{describe(value)}" unless String === value
      raise ArgumentError, "fathom: #{name} must not be empty" if value.empty?
      raise ArgumentError, "fathom: #{name} must not contain a NUL byte, got #{shown(value)}" if value.include?("\0")

      begin
        File.expand_path(value)
      rescue ArgumentError, EncodingError => e
        raise ArgumentError, "fathom: #{name} is not a usable path (#{clean(e.message)}), got #{shown(value)}"
      end
      value
    end

    # Whether `value` has a public method `name`, asked safely (a BasicObject
    # has no respond_to?).
    def responds_to?(value, name)
      Kernel.instance_method(:respond_to?).bind_call(value, name)
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
      raise TypeError, "fathom: #{name} must be a String, got #{describe(text)}" unless String === text

      value = begin
        Integer(text.strip, 10) if text.bytesize <= MAX_TEXT
      rescue ArgumentError, EncodingError
        nil
      end
      if value.nil?
        limit = " (at most #{MAX_TEXT} characters)" if text.bytesize > MAX_TEXT
        raise ArgumentError, "fathom: #{name} must be an integer #{range_text(range)}#{limit}, got #{shown(text)}"
      end

      integer(name, value, range)
    end

    # How many rows a report shows: nil (all) or a positive Integer. A number
    # beyond any report's length means all rows too (Array#first would raise
    # RangeError past a C long).
    def row_limit(name, value)
      return nil if NilClass === value
      unless Integer === value && value.positive?
        raise(Integer === value ? ArgumentError : TypeError,
              "fathom: #{name} must be a positive Integer (or nil for all rows), got #{describe(value)}")
      end

      value > MAX_ROWS ? nil : value
    end

    # "1.50ms"-style rendering of nanoseconds, for messages.
    def format_ns(ns)
      unit, factor = [["s", 1_000_000_000], ["ms", 1_000_000], ["us", 1_000]].find { |_, f| ns >= f } || ["ns", 1]
      text = format("%.3f", ns.to_f / factor).sub(/\.?0+\z/, "")
      "#{text}#{unit}"
    end

    def seconds_to_ns(name, seconds)
      if Float === seconds && !seconds.finite? || seconds <= 0
        raise ArgumentError, "fathom: #{name} must be #{DURATION_HINT}, got #{shown(seconds)}"
      end

      # Exactly (to_r): 1e300 * 1e9 as a Float is Infinity, whose #round
      # raises FloatDomainError.
      [(seconds.to_r * 1_000_000_000).round, 1].max
    end

    # Whole nanoseconds of a duration string, or nil when it is so large that
    # it is out of every range (the caller raises its range error).
    def parse_duration_string(name, text)
      m = text.bytesize <= MAX_TEXT && begin
        DURATION_RE.match(text)
      rescue ArgumentError, EncodingError # invalid bytes
        nil
      end
      raise ArgumentError, "fathom: #{name} must be #{DURATION_HINT}, got #{shown(text)}" unless m

      int_part, frac = m[1].split(".", 2)
      frac = frac.to_s
      digits = "#{int_part}#{frac}".sub(/\A0+/, "")
      raise ArgumentError, "fathom: #{name} must be #{DURATION_HINT}, got #{shown(text)}" if digits.empty? # zero

      exponent = m[2] ? Integer(m[2], 10) : 0
      # The number is digits * 10**(exponent - frac.size), so it lies in
      # [10**(magnitude - 1), 10**magnitude) seconds (before the unit).
      magnitude = digits.size + exponent - frac.size
      return nil if magnitude > MAX_MAGNITUDE
      return 1 if magnitude < -MAX_MAGNITUDE # rounds to 0ns, and a duration is at least 1ns

      # Rational keeps "0.1ms" exact (Float would give 99999.99...).
      number = Rational(Integer(digits, 10)) * Rational(10)**(exponent - frac.size)
      [(number * NS_PER_UNIT.fetch(m[3] || "s")).round, 1].max
    end

    # "in 1..4096", "of at least 1" (an endless range: "in >= 1" read as a typo).
    def range_text(range)
      range.end ? "in #{range.begin}..#{range.end}" : "of at least #{range.begin}"
    end

    # A value as messages show it: inspected, cut to a line's length, even
    # for objects whose #inspect fails or returns something odd.
    def shown(value)
      text = begin
        s = value.inspect
        String === s ? s : nil
      rescue StandardError
        nil
      end
      clean(text || "#<#{Kernel.instance_method(:class).bind_call(value)}>")
    end

    # Text from outside (a file's strings, an odd #inspect) made fit for a
    # one-line message: valid UTF-8, control characters escaped, cut short.
    def clean(text, max = 80)
      text = text.to_s.dup.force_encoding(Encoding::UTF_8).scrub
      text = "#{text[0, max - 20]}...(#{text.size} characters)" if text.size > max
      text.gsub(/[[:cntrl:]]/) { |c| format("\\x%02x", c.ord) }
    end

    def describe(value)
      "#{shown(value)} (#{Kernel.instance_method(:class).bind_call(value)})"
    end

    private_class_method :seconds_to_ns, :parse_duration_string, :range_text
  end
end
