# frozen_string_literal: true

# Production operations on big heaps: how long each takes and how long it
# stops the app. For each heap size (1M and 5M live objects; 10M with
# --big) a fresh process builds hashes of strings and arrays under a
# constant (5 objects per entry), then runs each operation while
#   - a ticker thread wakes every 1 ms and records the longest gap it sees
#     (the longest pause: 1 ms of sleep plus the time it waited for the GVL);
#   - a mutator thread rewrites ~1000 entries a second (an app that keeps
#     running, so that a forked child's copy-on-write image costs something);
#   - for the forked paths, a sampler thread reads /proc/<pid>/smaps_rollup
#     every 100 ms: the parent's Private_Dirty growth after fork is its
#     copy-on-write growth (pages it wrote and so copied while the child
#     lived), the child's Private_Dirty at its peak what the child itself used.
# Operations: heap profiler flush (census on, off), retention snapshot
# (in-process, forked), ObjectSpace.dump_all, `fathom dump` (Fathom.heap_dump,
# forked; plain JSON like dump_all and gzipped like the Rack endpoint), and
# `fathom analyze` of the dump_all file and of the gzipped fathom dump
# (their own process: wall time only).
#
#   ruby -Ilib bench/scale.rb [--big] [--sizes 1000000,5000000] [--cpu N] [--runs 3]
#                             [--ops flush,retention,dump_all,dump,analyze]
#
# Pinned with taskset to --cpu N (default: the last CPU); prints the Ruby.
# Medians of --runs runs of each operation; the ticker's figure is the
# median of the runs' longest gaps.
require "optparse"
require "rbconfig"
require "json"
require "tmpdir"
require "fileutils"

ROOT = File.expand_path("..", __dir__)
sizes = [1_000_000, 5_000_000]
cpu = nil
runs = 3
child = nil
ALL_OPS = %w[flush retention dump_all dump analyze].freeze
ops = ALL_OPS
OptionParser.new do |o|
  o.on("--big") { sizes << 10_000_000 }
  o.on("--sizes LIST") { |l| sizes = l.split(",").map { |s| Integer(s) } }
  o.on("--cpu N", Integer) { |n| cpu = n }
  o.on("--runs N", Integer) { |n| runs = n }
  o.on("--child N", Integer) { |n| child = n }
  o.on("--ops LIST", Array, "only these operations (#{ALL_OPS.join(",")}; analyze needs dump_all and dump)") do |l|
    abort "bench/scale.rb: unknown operation(s) #{(l - ALL_OPS).join(", ")}" unless (l - ALL_OPS).empty?
    ops = l
  end
end.parse!

unless child
  cpu ||= Integer(`nproc`) - 1
  puts "bench/scale.rb: Ruby #{RUBY_VERSION} (#{RbConfig.ruby}), pinned to CPU #{cpu} with taskset, medians of #{runs} runs"
  sizes.each do |n|
    ok = system("taskset", "-c", cpu.to_s, RbConfig.ruby, "-I#{ROOT}/lib", __FILE__, "--child", n.to_s, "--runs", runs.to_s,
                "--ops", ops.join(","))
    abort "bench/scale.rb: the #{n}-object run failed" unless ok
  end
  exit
end

$LOAD_PATH.unshift(File.join(ROOT, "lib"))
require "fathom"
require "objspace"

def now = Process.clock_gettime(Process::CLOCK_MONOTONIC)

def rollup(pid)
  text = File.read("/proc/#{pid}/smaps_rollup")
  { rss: text[/^Rss:\s+(\d+)/, 1].to_i, dirty: text[/^Private_Dirty:\s+(\d+)/, 1].to_i }
rescue Errno::ENOENT, Errno::ESRCH
  nil
end

def children
  Dir["/proc/#{Process.pid}/task/*/children"].flat_map { |f| File.read(f).split.map(&:to_i) }
rescue Errno::ENOENT
  []
end

module Scale
  TABLE = {}
end

objects = child
entries = objects / 5
entries.times { |i| Scale::TABLE[i] = { name: "item #{i}", tags: ["tag #{i % 100}", "x" * (i % 64)] } }
GC.start
live = GC.stat(:heap_live_slots)

# The ticker: the longest gap between its 1 ms wake-ups since the last reset.
$max_gap = 0.0
ticker = Thread.new do
  last = now
  loop do
    sleep 0.001
    t = now
    gap = t - last
    $max_gap = gap if gap > $max_gap
    last = t
  end
end
# The mutator: an app that keeps writing to its heap.
$mutate = true
mutator = Thread.new do
  r = Random.new(1)
  loop do
    sleep 0.001
    next unless $mutate

    i = r.rand(entries)
    Scale::TABLE[i] = { name: "item #{i}", tags: ["tag #{i % 100}", "y" * (i % 64)] }
  end
end

# Runs the block, returning [wall s, longest ticker gap s, memory] where
# memory (forked: true) holds the parent's RSS and Private_Dirty before and
# after, the parent's largest Private_Dirty growth while the child lived and
# the child's largest Private_Dirty.
def measure(forked: false)
  sleep 0.05
  before = rollup(Process.pid) if forked
  mem = { parent_dirty_min: nil, parent_dirty_max: 0, child_dirty_max: 0 }
  sampling = forked
  sampler = forked ? Thread.new do
    while sampling
      kids = children
      unless kids.empty?
        p = rollup(Process.pid)
        if p
          mem[:parent_dirty_min] = [mem[:parent_dirty_min] || p[:dirty], p[:dirty]].min
          mem[:parent_dirty_max] = [mem[:parent_dirty_max], p[:dirty]].max
        end
        kids.each { |k| (c = rollup(k)) && mem[:child_dirty_max] = [mem[:child_dirty_max], c[:dirty]].max }
      end
      sleep 0.1
    end
  end : nil
  $max_gap = 0.0
  t0 = now
  yield
  wall = now - t0
  sleep 0.01 # the ticker's wake-up that ends the gap
  gap = $max_gap
  sampling = false
  sampler&.join
  if forked
    after = rollup(Process.pid)
    mem[:rss_before] = before[:rss]
    mem[:rss_after] = after[:rss]
    mem[:cow] = mem[:parent_dirty_min] ? mem[:parent_dirty_max] - mem[:parent_dirty_min] : 0
  end
  [wall, gap, forked ? mem : nil]
end

def median(list) = list.sort[list.size / 2]

def ms(s) = s >= 1 ? format("%.2f s", s) : format("%.1f ms", s * 1000)

def mb(kb) = format("%.0f MB", kb / 1024.0)

def report(name, results, extra = nil)
  wall = median(results.map(&:first))
  gap = median(results.map { |r| r[1] })
  line = format("  %-42s wall %-9s longest pause %-9s", name, ms(wall), ms(gap))
  mem = results.last[2]
  if mem
    line += " RSS #{mb(mem[:rss_before])} -> #{mb(mem[:rss_after])}, CoW growth #{mb(mem[:cow])}, " \
            "child #{mb(mem[:child_dirty_max])}"
  end
  line += " #{extra}" if extra
  puts line
  $stdout.flush
end

puts "#{objects} objects asked, #{live} live slots, RSS #{mb(rollup(Process.pid)[:rss])} (Ruby #{RUBY_VERSION})"

[true, false].each do |census|
  next unless ops.include?("flush")

  profiler = Fathom::HeapProfiler.new(census: census)
  profiler.start
  results = Array.new(runs) do
    Array.new(2000) { |i| "alloc #{i}" }
    flushed = nil
    measure { flushed = profiler.flush } << flushed.stats
  end
  profiler.stop
  report("heap profiler flush, census #{census ? "on" : "off"}", results,
         census ? "(census #{results.last[3][:census]}, #{results.last[3][:census_slices]} slices, longest " \
                  "#{ms(results.last[3][:census_max_slice_ns].to_i / 1e9)})" : nil)
end

if ops.include?("retention")
  # Forked first: the in-process walk's graph more than doubles the RSS
  # (malloc keeps it), and fork() copies page tables in proportion to RSS,
  # so after it every fork measured the walk's leftovers, not the app.
  fork_stats = []
  results = Array.new(runs) do
    r = nil
    m = measure(forked: true) { r = Fathom.retention_snapshot(progress: nil) }
    fork_stats << r.stats
    m
  end
  report("retention snapshot, forked", results,
         "(fork #{ms(median(fork_stats.map { |s| s[:fork_ns] / 1e9 }))}, " \
         "child #{ms(median(fork_stats.map { |s| s[:child_ns] / 1e9 }))})")
  results = Array.new(runs) do
    measure { Fathom.retention_snapshot(fork: false, gc: false, progress: nil) }
  end
  report("retention snapshot, in-process", results)
end
dir = Dir.mktmpdir("fathom-scale")
dump = File.join(dir, "heap.json")
gz = File.join(dir, "fathom.json.gz")
if ops.include?("dump_all")
  results = Array.new(runs) do
    measure { File.open(dump, "w") { |f| ObjectSpace.dump_all(output: f) } }
  end
  report("ObjectSpace.dump_all", results, "(#{mb(File.size(dump) / 1024)})")
end
if ops.include?("dump")
  dump_stats = { false => [], true => [] }
  [false, true].each do |gzip|
    ours = File.join(dir, gzip ? "fathom.json.gz" : "fathom.json")
    results = Array.new(runs) do
      FileUtils.rm_f(ours)
      r = nil
      m = measure(forked: true) { r = Fathom.heap_dump(ours) }
      dump_stats[gzip] << r
      m
    end
    s = dump_stats[gzip]
    report("fathom dump (forked#{", gzip" if gzip})", results,
           "(fork #{ms(median(s.map { |x| x[:fork_ns] / 1e9 }))}, child #{ms(median(s.map { |x| x[:child_ns] / 1e9 }))}, " \
           "#{mb(File.size(ours) / 1024)}, #{s.last[:objects]} objects)")
  end
end
$mutate = false
if ops.include?("analyze") && File.exist?(dump) && File.exist?(gz)
  results = Array.new(runs) do
    t0 = now
    ok = system(RbConfig.ruby, "-I#{ROOT}/lib", File.join(ROOT, "exe/fathom"), "analyze", dump,
                "-o", File.join(dir, "retained.pb.gz"), out: File::NULL, err: File::NULL)
    raise "fathom analyze failed" unless ok

    [now - t0, 0.0, nil]
  end
  wall = median(results.map(&:first))
  puts format("  %-42s wall %-9s (its own process; %.0f MB/s)", "fathom analyze of that dump", ms(wall),
              File.size(dump) / 1e6 / wall)
  t0 = now
  ok = system(RbConfig.ruby, "-I#{ROOT}/lib", File.join(ROOT, "exe/fathom"), "analyze", gz,
              "-o", File.join(dir, "retained2.pb.gz"), out: File::NULL, err: File::NULL)
  raise "fathom analyze of the fathom dump failed" unless ok

  puts format("  %-42s wall %-9s (its own process, one run)", "fathom analyze of the gzipped fathom dump", ms(now - t0))
end
FileUtils.rm_rf(dir)
ticker.kill
mutator.kill
