# frozen_string_literal: true

# How far behind a PeriodicFlusher falls while the main thread runs Ruby
# code without pause (holding the GVL): a busy loop for DURATION seconds
# with a flusher at INTERVAL, then the number of files and the flusher's
# lateness stats. Not a test (timings depend on the machine).
#
#   ruby -Ilib bench/flusher_lateness.rb [--mode heap|gc] [--interval 0.2] [--duration 4]
#
# Before the flusher wrote its files in one native call (docs/internals/io.md,
# "The periodic flusher"), 0.2 s for 4 s gave 4-6 files on Ruby 3.1 and 2 on
# 3.3.8; about 20 is on time.
require "optparse"
require "tmpdir"
require "fathom"

mode = "heap"
interval = 0.2
duration = 4.0
OptionParser.new do |o|
  o.on("--mode MODE", %w[heap gc]) { |v| mode = v }
  o.on("--interval SECONDS", Float) { |v| interval = v }
  o.on("--duration SECONDS", Float) { |v| duration = v }
end.parse!

Dir.mktmpdir("fathom-flusher-bench") do |dir|
  profiler = mode == "gc" ? Fathom::GcProfiler.new.start : Fathom::HeapProfiler.new.start
  flusher = Fathom::PeriodicFlusher.new(profiler, dir: dir, interval: interval).start
  started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
  x = 0
  while Process.clock_gettime(Process::CLOCK_MONOTONIC) - started < duration
    i = 0
    while i < 100_000
      x += i
      i += 1
    end
  end
  files = Dir.children(dir).size
  stats = flusher.stats
  flusher.stop
  profiler.stop
  ms = ->(ns) { format("%.1fms", ns / 1e6) }
  puts "Ruby #{RUBY_VERSION}, #{mode} profiler, interval #{interval}s, busy main thread for #{duration}s"
  puts "files written   #{files} (on time: #{(duration / interval).floor})"
  puts "late flushes    #{stats[:late_flushes]} of #{stats[:flushes_on_tick]} (late by max #{ms[stats[:max_late_by_ns]]})"
  puts "skipped ticks   #{stats[:skipped_ticks]}"
  puts "flush took      max #{ms[stats[:max_flush_ns]]}"
end
