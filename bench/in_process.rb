# frozen_string_literal: true

# The --in-process measurement bench/overhead.rb and bench/cpu_overhead.rb
# share. One process runs every mode in turn, each between two baseline
# runs (baseline, m1, baseline, m2, ..., baseline; the modes' order
# reversed every other round), for `rounds` rounds; a mode's figure is the
# median over the rounds of its CPU time over the mean of its two
# neighbouring baselines. The work runs once first, untimed (warm-up).
#
# Why: on this project's VMs one fresh process runs the same loop 3-5%
# faster or slower than the next (measured in chunks: steady within a
# process, different between processes), which leaves 1% effects beyond
# the reach of medians of ~15 fresh processes. What it cannot see: the
# one-time costs of a first start in a process (the fresh-process tables
# show them). Each run gets a new profiler, started before the timed work
# and stopped (and flushed, if it has a flush) after it.
module BenchInProcess
  module_function

  # make: mode => a lambda returning a profiler (start/stop[/flush]) or
  # nil (the baseline). Returns { mode => [ratio per round] }.
  def ratios(make, modes, work, rounds)
    cpu_now = -> { Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID) }
    timed = lambda do |mode|
      profiler = make.fetch(mode)&.call
      profiler&.start
      c0 = cpu_now.call
      work.call
      c1 = cpu_now.call
      profiler&.stop
      profiler.flush if profiler.respond_to?(:flush)
      c1 - c0
    end
    others = modes - ["baseline"]
    out = Hash.new { |h, k| h[k] = [] }
    work.call
    rounds.times do |r|
      before = timed.call("baseline")
      (r.even? ? others : others.reverse).each do |mode|
        t = timed.call(mode)
        after = timed.call("baseline")
        out[mode] << t / ((before + after) / 2)
        before = after
      end
    end
    out
  end

  # The child's output: one line per mode, "mode r1,r2,...".
  def print(ratios)
    ratios.each { |mode, list| puts "#{mode} #{list.join(",")}" }
  end

  # The parent: runs `cmd` (the child) per workload and prints a table.
  def report(cmd_for, workloads, header)
    puts header
    workloads.each do |workload|
      out = IO.popen(cmd_for.call(workload), &:read)
      abort "in-process child for #{workload} failed" unless $?.success?
      puts
      puts "#{workload}: CPU time over the mean of the neighbouring baselines, median (min..max) of the rounds"
      out.each_line do |line|
        mode, list = line.split
        r = list.split(",").map(&:to_f).sort
        puts format("  %-19s %.4fx  (%.4f..%.4f)", mode, r[r.size / 2], r.first, r.last)
      end
    end
  end
end
