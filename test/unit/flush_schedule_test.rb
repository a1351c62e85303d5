# frozen_string_literal: true

require "test_helper"

# PeriodicFlusher::FlushSchedule with a made-up clock: fixed-rate ticks, lateness, skips.
class FlushScheduleTest < Minitest::Test
  MS = 1_000_000

  def test_ticks_at_a_fixed_rate_from_the_start
    s = Fathom::PeriodicFlusher::FlushSchedule.new(100 * MS, 0)
    assert_equal 100 * MS, s.remaining_ns(0)
    assert_equal 0, s.begin_flush(100 * MS)
    # A flush that takes 30 ms does not push the next tick back.
    assert_equal 70 * MS, s.remaining_ns(130 * MS)
    assert_equal 5 * MS, s.begin_flush(205 * MS)
    stats = s.stats
    assert_equal 2, stats[:flushes_on_tick]
    assert_equal 0, stats[:late_flushes], "5 ms is within a tenth of the interval"
    assert_equal 5 * MS, stats[:late_by_ns]
    assert_equal 0, stats[:skipped_ticks]
    refute s.behind?
  end

  def test_late_flushes_and_skipped_ticks
    s = Fathom::PeriodicFlusher::FlushSchedule.new(100 * MS, 0)
    assert_equal 40 * MS, s.begin_flush(140 * MS)
    assert_equal 1, s.stats[:late_flushes]
    # The flush ran until 450 ms: ticks 200 and 300 passed meanwhile.
    assert_equal 250 * MS, s.begin_flush(450 * MS)
    stats = s.stats
    assert_equal 2, stats[:skipped_ticks]
    assert_equal 250 * MS, stats[:max_late_by_ns]
    assert s.behind?
    # Next tick: 500 ms, not 300 ms.
    assert_equal 50 * MS, s.remaining_ns(450 * MS)
  end

  def test_flush_durations
    s = Fathom::PeriodicFlusher::FlushSchedule.new(100 * MS, 0)
    s.record_flush_ns(7 * MS)
    s.record_flush_ns(3 * MS)
    assert_equal 3 * MS, s.stats[:flush_ns]
    assert_equal 7 * MS, s.stats[:max_flush_ns]
  end
end
