# frozen_string_literal: true

# One measured run in a fresh child process, what bench/overhead.rb and
# bench/cpu_overhead.rb print per child: the profiler (made after a full
# GC, so no earlier garbage is collected inside the run) is started and
# stopped inside the timed span, so its own start and stop count as its
# cost; work_cpu is the process CPU of the work alone, between them.
module TimedRun
  Run = Struct.new(:profiler, :wall, :cpu, :work_cpu)

  module_function

  # make: a lambda returning a profiler (start/stop) or nil (the baseline).
  def measure(make, work)
    GC.start
    profiler = make&.call
    t0 = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    c0 = cpu_now
    profiler&.start
    w0 = cpu_now
    work.call
    w1 = cpu_now
    profiler&.stop
    Run.new(profiler, Process.clock_gettime(Process::CLOCK_MONOTONIC) - t0, cpu_now - c0, w1 - w0)
  end

  def cpu_now = Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID)
end
