# frozen_string_literal: true

# How long /slow waits, in small sleeps so that the request thread stays a
# parked server thread holding its records (not one long sleep in C).
module SlowRequests
  def self.wait(seconds)
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + seconds.clamp(0, 30)
    sleep(0.02) while Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
  end
end
