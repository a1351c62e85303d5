# frozen_string_literal: true

require_relative "units"

module Fathom
  module Report
    # The line a GC report adds when the wall time in GC is well above the
    # CPU time in GC. Both are right: wall time is how long the program's
    # thread was paused in GC, and counts the time it waited for a CPU
    # (beside two CPU hogs on 2 cores, Ruby 3.3.8: 4.4 s of wall time for
    # 0.94 s of CPU in 50 GC.start, both matching the thread's own clocks
    # around the calls within 1%); CPU time is what the GC cost, and what
    # GC.stat(:time) counts. Without this line a reader comparing the wall
    # time with GC.stat(:time) took one of them for wrong (issue 41).
    module GcOffCpu
      # Below this share of the wall time the gap is the GC's own: on a
      # quiet machine a step's CPU time is 0.94-0.99 of its wall time.
      SHARE = 0.2

      # nil when there is nothing to say (or no wall time: counters).
      def self.line(wall_ns, cpu_ns)
        return nil unless wall_ns && cpu_ns && wall_ns.positive?

        off = wall_ns - cpu_ns
        return nil if off < wall_ns * SHARE

        "off the CPU     #{Units.format_value(off.round, "nanoseconds")} of the wall time in GC " \
          "(#{Units.percentage(off, wall_ns).strip}): the thread waited for a CPU (a busy machine) or was blocked;\n" \
          "                GC.stat(:time) counts CPU time only\n"
      end
    end
  end
end
