# frozen_string_literal: true

module Fathom
  # The clock of every deadline, interval and back-off in lib/: monotonic,
  # so a wall-clock step (NTP, a VM resumed) neither fires nor stalls them.
  module Monotonic
    module_function

    def now
      Process.clock_gettime(Process::CLOCK_MONOTONIC)
    end

    def now_ns
      Process.clock_gettime(Process::CLOCK_MONOTONIC, :nanosecond)
    end
  end
end
