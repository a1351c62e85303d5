# frozen_string_literal: true

# Flush cost with 1,000,000 live sampled objects (exact mode), and how long
# the flush keeps other threads from running. A ticker thread that wants the
# GVL every millisecond runs alongside, so the flush has someone to yield to;
# its worst lateness is the latency the application would feel.
#
#   ruby -Ilib bench/flush.rb [--objects 1000000]
#   ruby -Ilib bench/flush.rb --liveness object_id|weakmap
#
# --liveness switches to sampled mode at a 10us interval (tens of thousands
# of live samples instead of a million records) with that liveness token
# kind, to compare what the tokens cost: at commit (Track, in the allocation
# loop's time) and at flush (Lookup, in walk_ns).
require "optparse"
$LOAD_PATH.unshift(File.expand_path("../lib", __dir__))
require "fathom"

objects = 1_000_000
sites = 100
liveness = nil
OptionParser.new do |o|
  o.on("--objects N", Integer) { |n| objects = n }
  o.on("--liveness KIND", %w[object_id weakmap], "sampled mode with these liveness tokens") { |k| liveness = k.to_sym }
  o.on("--sites N", Integer, "distinct allocation stacks (default 100)") { |n| sites = n }
end.parse!

# Distinct allocation sites, like an application's.
module Sites; end
# module_eval of source, not define_method: each site needs its own iseq to
# be its own stack (define_method blocks would share one).
sites.times do |i|
  Sites.module_eval("def site_#{i}(n, out) = n.times { out << Object.new }", "site_#{i}.rb", 1)
end
include Sites

profiler = liveness ? Fathom::HeapProfiler.new(interval: 0.00001, liveness: liveness) : Fathom::HeapProfiler.new(exact: true)
mode = liveness ? "sampled mode, #{liveness} tokens" : "exact mode"
kept = []
per_site = objects / sites
a0 = Process.clock_gettime(Process::CLOCK_MONOTONIC)
profiler.start
sites.times { |i| send(:"site_#{i}", per_site, kept) }
profiler.stop
alloc_s = Process.clock_gettime(Process::CLOCK_MONOTONIC) - a0
GC.start

max_late = 0.0
stop = false
ticker = Thread.new do
  until stop
    t = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    sleep 0.001
    late = Process.clock_gettime(Process::CLOCK_MONOTONIC) - t - 0.001
    max_late = late if late > max_late
  end
end
sleep 0.05
max_late = 0.0

gc0 = GC.stat.values_at(:minor_gc_count, :major_gc_count)
t0 = Process.clock_gettime(Process::CLOCK_MONOTONIC)
profile = profiler.flush
t1 = Process.clock_gettime(Process::CLOCK_MONOTONIC)
gcs = GC.stat.values_at(:minor_gc_count, :major_gc_count).zip(gc0).map { |a, b| a - b }
stop = true
ticker.join

s = profile.stats
puts "Fathom flush benchmark (Ruby #{RUBY_VERSION}): #{kept.size} live objects from #{sites} sites, #{mode}"
puts format("  allocation loop    %8.1f ms while profiled (commits included)", alloc_s * 1e3)
puts format("  flush total        %8.1f ms (wall, measured outside)", (t1 - t0) * 1e3)
puts format("  flush_ns           %8.1f ms  (walk %.1f ms, symbolize %.1f ms, encode+gzip off-GVL %.1f ms)",
            s[:flush_ns] / 1e6, s[:walk_ns] / 1e6, s[:symbolize_ns] / 1e6, s[:encode_ns] / 1e6)
puts format("  longest GVL hold   %8.2f ms  (%d yields)", s[:max_gvl_hold_ns] / 1e6, s[:gvl_yields])
puts format("  ticker max late    %8.2f ms  (what another thread felt)", max_late * 1e3)
puts format("  Ruby GCs during    %d minor, %d major (a GC holds the GVL by nature; symbolizing allocates)", *gcs)
puts format("  live samples       %8d, profile %d bytes gzipped", s[:live_samples], s[:bytes])
puts format("  walk per sample    %8.2f us (liveness %s)", s[:walk_ns] / 1e3 / [s[:samples], 1].max, s[:liveness])
