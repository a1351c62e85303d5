# frozen_string_literal: true

# Offline dump analysis throughput: generates its own ObjectSpace.dump_all
# file (allocation tracing on, so file/line/generation are in it) of about
# --objects live objects, then runs Fathom.analyze_dump on it in a fresh
# process and prints each phase's time, MB/s and the peak memory: the
# analyzer's own arrays (stats[:peak_bytes]) and the process's VmHWM.
#
#   ruby -Ilib bench/dump.rb [--objects 2000000] [--keep DIR]
#
# Goals (issue 13): parse >= 400 MB/s, 1 GB end to end <= 10 s,
# <= 100 B/object at the peak.
require "optparse"
require "tmpdir"
require "rbconfig"
require "json"
require "fileutils"

objects = 2_000_000
keep = nil
OptionParser.new do |o|
  o.on("--objects N", Integer) { |n| objects = n }
  o.on("--keep DIR", "write the dump there and keep it") { |d| keep = d }
end.parse!

lib = File.expand_path("../lib", __dir__)
dir = keep || Dir.mktmpdir("fathom-bench-dump")
path = File.join(dir, "bench.json")

# A heap shaped like an application's: a registry hash of records, each an
# object with a few strings and a small array, plus a linked list.
generator = <<~RUBY
  require "objspace"
  ObjectSpace.trace_object_allocations_start
  Rec = Struct.new(:name, :tags, :body)
  class Node; def initialize(n) = (@next = n; @v = "node"); end
  n = #{objects}
  REG = {}
  (n / 6).times { |i| REG["key-\#{i}"] = Rec.new("name \#{i}", ["a", "b"], "x" * (i % 64)) }
  list = nil
  (n / 12).times { list = Node.new(list) }
  $list = list
  GC.start
  File.open(#{path.dump}, "w") { |f| ObjectSpace.dump_all(output: f) }
RUBY
t = Process.clock_gettime(Process::CLOCK_MONOTONIC)
system(RbConfig.ruby, "-e", generator, exception: true)
gen_s = Process.clock_gettime(Process::CLOCK_MONOTONIC) - t
size = File.size(path)

analyzer = <<~RUBY
  require "fathom"
  require "json"
  t = Process.clock_gettime(Process::CLOCK_MONOTONIC)
  p = Fathom.analyze_dump(#{path.dump}, progress: false)
  total = Process.clock_gettime(Process::CLOCK_MONOTONIC) - t
  hwm = File.read("/proc/self/status")[/VmHWM:\\s+(\\d+)/, 1].to_i * 1024
  s = p.stats
  puts JSON.generate(total: total, hwm: hwm, objects: s[:objects], peak: s[:peak_bytes], phases: s[:phases_ns],
                     profile: p.bytes.bytesize, reachable: s[:reachable_objects])
RUBY
# Baseline: the same Ruby doing nothing but loading Fathom.
base = IO.popen([RbConfig.ruby, "-I#{lib}", "-e", 'require "fathom"; puts File.read("/proc/self/status")[/VmHWM:\s+(\d+)/, 1].to_i * 1024'], &:read).to_i
r = JSON.parse(IO.popen([RbConfig.ruby, "-I#{lib}", "-e", analyzer], &:read), symbolize_names: true)

mb = ->(b) { format("%.1f MB", b / 1e6) }
n = r[:objects]
puts "dump: #{mb.(size)}, #{n} objects (#{r[:reachable]} reachable), generated in #{format("%.1f", gen_s)} s"
r[:phases].each do |phase, ns|
  s = ns / 1e9
  extra = phase == :parse ? format(" (%.0f MB/s)", size / 1e6 / s) : ""
  puts format("  %-11s %7.3f s%s", phase, s, extra)
end
puts format("  %-11s %7.3f s (%.0f MB/s; a 1 GB dump: ~%.1f s)", "total", r[:total], size / 1e6 / r[:total], r[:total] * 1e9 / size)
puts "peak: analyzer arrays #{mb.(r[:peak])} = #{format("%.1f", r[:peak].to_f / n)} B/object; " \
     "process VmHWM #{mb.(r[:hwm])} (#{format("%.1f", (r[:hwm] - base).to_f / n)} B/object over a bare Ruby's #{mb.(base)})"
puts "profile: #{r[:profile]} bytes gzipped"
FileUtils.rm_rf(dir) unless keep
