# frozen_string_literal: true

# Issue 41's table for the Ruby running this: the GC profile's figures
# against Ruby's GC.stat(:time) and against the thread's own clocks around
# each GC.start, for each GC source, from the accuracy test's program
# (test/fixtures/gc_churn.rb: churn with 50 GC.start). Not a test: it
# prints what test/integration/gc_accuracy_test.rb asserts, with the
# numbers, quiet or beside CPU hogs.
#
#   ruby -Ilib bench/gc_accuracy.rb [--hogs N] [--runs N] [--sources hooks,counters]
#
# --hogs N starts N `yes > /dev/null` beside it (the issue's busy machine:
# two on a 2-core VM) and stops them at the end.
#
# Columns: GC.stat(:time) (process CPU in GC, ms); the profile's CPU and
# wall totals; the thread's run-queue delay (plus steal) over the run (time
# it was runnable but not running: how much wall time may exceed CPU time);
# the forced majors (cause "method") in the profile against the thread CPU
# clock and the monotonic clock around GC.start, and the run delay around
# those; and the report's `major force` row.
require "optparse"
require "tmpdir"
require "fathom"
require_relative "../test/fixtures/gc_churn"

hogs = 0
runs = 2
sources = %i[hooks counters]
OptionParser.new do |o|
  o.on("--hogs N", Integer) { |v| hogs = v }
  o.on("--runs N", Integer) { |v| runs = v }
  o.on("--sources LIST", Array) { |v| sources = v.map(&:to_sym) }
end.parse!

hog_pids = Array.new(hogs) { Process.spawn("yes", out: File::NULL) }
at_exit do
  hog_pids.each do |pid|
    Process.kill(:TERM, pid)
    Process.wait(pid)
  end
end

ms = ->(ns) { ns.nil? ? "-" : format("%.1f", ns / 1e6) }
pct = ->(a, b) { a.nil? || b.nil? || b.zero? ? "-" : format("%+.1f%%", 100.0 * (a - b) / b) }

puts "Ruby #{RUBY_VERSION}, #{hogs} CPU hogs beside it, load #{File.read("/proc/loadavg").split[0]}"
sources.each do |source|
  runs.times do
    truth = nil
    profile = Fathom.profile(mode: :gc, gc_source: source) { truth = GcChurn.run }
    summary = Fathom::Report::GcSummary.new(Fathom::Pprof.read(profile.bytes))
    forced = summary.rows.select { |r| r.type == "major" && r.cause == "method" }
    forced_cpu = forced.sum(&:cpu)
    forced_wall = summary.counters_layout? ? nil : forced.sum(&:wall)
    force_row = summary.rows.find { |r| r.type == "major" && r.reason == "force" && r.cause == "method" }
    gcstat_ns = truth[:time_ms] * 1_000_000
    puts format("%-8s GC.stat(:time) %7s | cpu %7s (%s) wall %7s (%s) | off-CPU %7s | " \
                "forced cpu %7s vs clock %7s (%s), wall %7s vs clock %7s (%s, off-CPU %s) | " \
                "'major force' row: wall %s cpu %s",
                source, ms[gcstat_ns], ms[summary.total(:cpu)], pct[summary.total(:cpu), gcstat_ns],
                ms[summary.total(:wall)], pct[summary.total(:wall), gcstat_ns],
                ms[truth[:run_delay_ns] && truth[:run_delay_ns] + truth[:steal_ns].to_i],
                ms[forced_cpu], ms[truth[:forced_cpu_ns]], pct[forced_cpu, truth[:forced_cpu_ns]],
                ms[forced_wall], ms[truth[:forced_wall_ns]], pct[forced_wall, truth[:forced_wall_ns]],
                ms[truth[:forced_run_delay_ns]], ms[force_row&.wall], ms[force_row&.cpu])
  end
end
