# frozen_string_literal: true

# Retention snapshot cost on a large heap: builds about --objects live
# objects (sessions holding strings and arrays, in a constant hash, the way
# a leaking app looks), then takes Fathom.retention_snapshot and encodes the
# pprof. Reports the time of each phase, how long the GVL was held, and the
# extra memory: Fathom's own arrays at their peak (exact accounting) and the
# process's peak RSS growth (VmHWM, includes allocator slack).
#
#   ruby -Ilib bench/retention.rb [--objects 1000000]
require "optparse"
$LOAD_PATH.unshift(File.expand_path("../lib", __dir__))
require "fathom"

objects = 1_000_000
OptionParser.new { |o| o.on("--objects N", Integer) { |n| objects = n } }.parse!

def hwm_kb
  File.read("/proc/self/status")[/VmHWM:\s+(\d+)/, 1].to_i
end

module Bench
  HEAP = {}
end
# Each entry: a Session-like object (1), its @name string (1), an array (1)
# of 2 strings (2): 5 objects.
Item = Struct.new(:name, :tags)
(objects / 5).times do |i|
  Bench::HEAP[i] = Item.new("item #{i}", ["tag #{i % 100}", "x" * (i % 64)])
end
GC.start
live = ObjectSpace.count_objects.values_at(:TOTAL).first - ObjectSpace.count_objects[:FREE]
rss_before = hwm_kb
t0 = Process.clock_gettime(Process::CLOCK_MONOTONIC)
profile = Fathom.retention_snapshot(gc: false, progress: $stderr)
t1 = Process.clock_gettime(Process::CLOCK_MONOTONIC)
s = profile.stats
n = s[:objects]
ms = ->(ns) { format("%.0f ms", ns / 1e6) }
puts "Fathom retention snapshot (Ruby #{RUBY_VERSION}): #{n} objects in the graph (#{live} live slots), #{s[:edges]} edges"
puts "  total (snapshot + dominators + pprof): #{format("%.2f s", t1 - t0)}"
puts "  walk #{ms[s[:walk_ns]]}, naming #{ms[s[:name_ns]]} (GVL held #{ms[s[:gvl_held_ns]]}), " \
     "dominators #{ms[s[:analyze_ns]]}, encode #{ms[s[:encode_ns]]}"
peak = [s[:peak_builder_bytes], s[:graph_bytes] + s[:dominator_peak_bytes]].max
puts "  Fathom's arrays: builder peak #{s[:peak_builder_bytes] / 1024} kB, graph #{s[:graph_bytes] / 1024} kB, " \
     "dominator working set #{s[:dominator_peak_bytes] / 1024} kB -> #{format("%.1f", peak.fdiv(n))} bytes/object at the peak"
puts "  peak RSS growth: #{hwm_kb - rss_before} kB -> #{format("%.1f", (hwm_kb - rss_before) * 1024.0 / n)} bytes/object"
puts "  profile: #{profile.bytes.bytesize / 1024} kB gzipped"
