# frozen_string_literal: true

module Fathom
  class PeriodicFlusher
    # When a PeriodicFlusher's flushes are due, and how late they start.
    #
    # Ticks are at a fixed rate from the start (start + k * interval), not
    # "interval after the previous flush ended", so a slow flush does not push
    # every later one back. A flush can start late: the flusher is a Ruby
    # thread, and with another thread running Ruby code it gets the GVL back
    # only at that thread's next time slice (100 ms) every time it waited for
    # something (docs/internals/io.md, "The periodic flusher"). A tick that has
    # passed while the previous flush was still running is skipped rather than
    # flushed right away: the next file covers its window too. All numbers
    # are monotonic-clock nanoseconds; the caller serializes the calls.
    class FlushSchedule
      attr_reader :interval_ns

      def initialize(interval_ns, now_ns)
        @interval_ns = interval_ns
        @next_ns = now_ns + interval_ns
        @flushes = 0
        @late_flushes = 0
        @skipped_ticks = 0
        @late_by_ns = 0
        @max_late_by_ns = 0
        @flush_ns = 0
        @max_flush_ns = 0
      end

      # Nanoseconds until the next tick; <= 0 when it is due.
      def remaining_ns(now_ns)
        @next_ns - now_ns
      end

      # A flush for the due tick starts at now_ns. Returns how late it is.
      def begin_flush(now_ns)
        tick = @next_ns
        late = now_ns > tick ? now_ns - tick : 0
        missed = late / @interval_ns # ticks that passed while this one waited
        @skipped_ticks += missed
        @next_ns = tick + (missed + 1) * @interval_ns
        @flushes += 1
        # Late: more than a tenth of the interval after its tick.
        @late_flushes += 1 if late * 10 > @interval_ns
        @late_by_ns = late
        @max_late_by_ns = late if late > @max_late_by_ns
        late
      end

      # A flush (begun or not by a tick) took `ns`.
      def record_flush_ns(ns)
        @flush_ns = ns
        @max_flush_ns = ns if ns > @max_flush_ns
      end

      def behind?
        @skipped_ticks.positive?
      end

      def stats
        { interval_ns: @interval_ns, flushes_on_tick: @flushes, late_flushes: @late_flushes,
          skipped_ticks: @skipped_ticks, late_by_ns: @late_by_ns, max_late_by_ns: @max_late_by_ns,
          flush_ns: @flush_ns, max_flush_ns: @max_flush_ns }
      end
    end
  end
end
