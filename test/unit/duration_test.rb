# frozen_string_literal: true

require "test_helper"

class DurationTest < Minitest::Test
  def ns(value, **bounds)
    Fathom::Options.duration_ns("interval", value, **bounds)
  end

  def test_numeric_seconds
    assert_equal 1_000_000, ns(0.001)
    assert_equal 2_000_000_000, ns(2)
    assert_equal 500_000, ns(Rational(1, 2000))
    assert_equal 20_000, ns(0.00002)
  end

  def test_strings_with_units
    assert_equal 100, ns("100ns")
    assert_equal 500_000, ns("500us")
    assert_equal 500_000, ns("500µs")
    assert_equal 1_000_000, ns("1ms")
    assert_equal 2_500_000_000, ns("2.5s")
    assert_equal 100_000, ns("0.1ms") # exact: no Float rounding
    assert_equal 500_000, ns(".5ms")
    assert_equal 1_500_000, ns(" 1.5 ms ")
    assert_equal 1_000, ns("1e-6")
  end

  def test_bare_number_strings_are_seconds
    assert_equal 2_000_000, ns("0.002")
    assert_equal 3_000_000_000, ns("3")
  end

  def test_sub_nanosecond_rounds_up_to_one
    assert_equal 1, ns("0.1ns")
    assert_equal 1, ns(1e-12)
  end

  def test_rejects_bad_strings
    ["", "ms", "1 minute", "-1ms", "1y", "1.2.3s", "0s", "0", "1_000ns", "abc"].each do |text|
      error = assert_raises(ArgumentError, text) { ns(text) }
      assert_includes error.message, "interval must be a positive duration"
      assert_includes error.message, text.inspect
    end
  end

  def test_bounds
    assert_equal 1_000, ns("1us", min_ns: 1_000)
    error = assert_raises(ArgumentError) { ns("999ns", min_ns: 1_000, max_ns: 10_000) }
    assert_equal 'fathom: interval must be between 1us and 10us, got "999ns"', error.message
    assert_raises(ArgumentError) { ns(1, max_ns: 999_999_999) }
  end

  def test_seconds_helper
    assert_in_delta 0.0015, Fathom::Options.duration("interval", "1.5ms")
  end

  def test_format_ns
    f = Fathom::Options.method(:format_ns)
    assert_equal "1us", f.call(1_000)
    assert_equal "1.5ms", f.call(1_500_000)
    assert_equal "3600s", f.call(3_600_000_000_000)
    assert_equal "12ns", f.call(12)
  end
end
