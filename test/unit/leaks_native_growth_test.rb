# frozen_string_literal: true

require "test_helper"
require "fathom/leaks/native_growth"

# Leaks::NativeGrowth on made-up series (deterministic): whether the
# process's growth is Ruby's or outside Ruby objects.
class LeaksNativeGrowthTest < Minitest::Test
  MB = 1 << 20
  # What NativeGrowth reads of a History.
  FakeHistory = Struct.new(:times, :totals, :memory)

  def history(windows: 30)
    times = Array.new(windows) { |i| 1_000.0 + i }
    totals = []
    memory = []
    windows.times do |i|
      ruby, rss, malloc = yield(i)
      totals << ruby
      memory << { rss: rss, malloc_in_use: malloc, malloc_free: 2 * MB, ruby_heap: 3 * MB }
    end
    FakeHistory.new(times, totals, memory)
  end

  # The steady leak app in exact mode (Ruby 3.1, `fathom leaks` on its 31
  # files), as it ran, in MB a window: RSS with its steps at windows 1-2
  # and 9 (malloc's arenas and the profiler's tables growing once), the
  # Ruby objects' in-use bytes growing by the leak's 200 strings of ~1 kB,
  # and malloc's in-use bytes (the strings' buffers among them). RSS grows
  # by over twice the Ruby objects, yet RSS minus the Ruby objects is flat
  # after the steps. Over its first 26 to 29 windows the rule of shares
  # alone called that growth outside Ruby (the monitor did, at window 27).
  STEADY = {
    ruby: [2.751, 1.749, 1.959, 2.179, 2.383, 2.591, 2.801, 3.014, 3.726, 3.613, 3.823, 4.045, 4.246, 4.457, 4.67,
           4.881, 5.094, 5.307, 5.519, 5.717, 5.925, 6.14, 6.352, 6.54, 6.785, 6.999, 7.194, 7.402, 7.613, 7.824, 6.947],
    rss: [24.44, 26.4, 31.01, 31.65, 32.0, 32.26, 32.46, 32.69, 34.07, 41.66, 41.99, 42.0, 42.03, 42.04, 42.05, 41.87,
          41.9, 42.06, 42.3, 42.49, 42.84, 42.98, 43.28, 43.47, 43.75, 43.96, 44.25, 44.6, 44.87, 44.96, 45.2],
    malloc: [10.86, 12.02, 15.83, 16.09, 16.36, 16.58, 16.8, 17.03, 17.81, 18.69, 18.88, 19.11, 19.33, 19.55, 19.76,
             20.43, 20.65, 20.9, 21.11, 21.32, 21.53, 21.78, 22.05, 22.25, 22.49, 22.71, 22.92, 23.13, 23.35, 23.58, 24.94],
  }.freeze

  def test_a_ruby_leak_with_steps_of_rss_is_not_growth_outside_ruby
    (26..STEADY[:rss].size).each do |n|
      h = history(windows: n) { |i| STEADY.values_at(:ruby, :rss, :malloc).map { |v| v[i] * 1e6 } }
      result = Fathom::Leaks::NativeGrowth.analyze(h)
      assert_operator result.rss_growth, :>, 8 * MB, n
      assert_equal :ruby, result.kind, n
      refute_predicate result, :outside_ruby?
    end
  end

  # The double leak app in exact mode (Ruby 3.4), MB a window: RSS minus
  # the Ruby objects rises by steps at windows 2, 9 and 22 and is flat
  # between them.
  DOUBLE = {
    ruby: [2.65, 1.73, 1.89, 2.03, 2.21, 2.37, 2.54, 2.7, 3.02, 3.1, 3.3, 3.45, 3.61, 3.77, 3.94, 4.1, 4.25, 4.41, 4.54,
           4.71, 4.92, 5.09, 5.24, 5.4, 5.57, 5.72, 5.87, 6.04, 6.18, 6.34, 5.44],
    rss: [24.54, 26.07, 31.22, 31.74, 31.94, 32.16, 32.24, 32.34, 33.83, 38.7, 38.91, 38.98, 39.05, 39.11, 39.18, 39.25,
          39.32, 39.44, 39.51, 39.65, 39.76, 39.81, 40.89, 41.27, 41.36, 41.52, 41.75, 41.83, 42.09, 42.29, 42.48],
    malloc: [12.85, 13.71, 17.37, 17.77, 17.92, 18.04, 18.14, 18.23, 18.87, 19.14, 19.28, 19.37, 19.46, 19.55, 19.64,
             19.74, 19.84, 19.94, 20.04, 20.13, 20.29, 20.86, 21.01, 21.1, 21.19, 21.29, 21.38, 21.49, 21.58, 21.69, 23.27],
  }.freeze

  def test_steps_of_rss_beside_a_ruby_leak_are_not_growth_outside_ruby
    (16..DOUBLE[:rss].size).each do |n|
      h = history(windows: n) { |i| DOUBLE.values_at(:ruby, :rss, :malloc).map { |v| v[i] * 1e6 } }
      result = Fathom::Leaks::NativeGrowth.analyze(h)
      refute_predicate result, :outside_ruby?, "#{n} windows: #{result.kind}"
    end
  end

  # C code mallocs 1 MB a window; Ruby objects stay flat.
  def test_a_native_leak_is_growth_outside_ruby
    h = history { |i| [10 * MB + (i.even? ? 50_000 : 0), 30 * MB + i * MB, 12 * MB + i * MB] }
    result = Fathom::Leaks::NativeGrowth.analyze(h)
    assert_equal :outside_ruby, result.kind
    assert_predicate result, :outside_ruby?
  end

  # Both at once: the native part grows by itself beside the Ruby leak.
  def test_a_native_leak_beside_a_ruby_leak_is_still_said
    h = history { |i| [10 * MB + i * 0.2 * MB, 30 * MB + i * 1.2 * MB, 12 * MB + i * 1.2 * MB] }
    result = Fathom::Leaks::NativeGrowth.analyze(h)
    assert_equal :outside_ruby, result.kind
  end
end
