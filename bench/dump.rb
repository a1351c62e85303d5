# frozen_string_literal: true

# Offline dump analysis throughput and memory. Generates its own
# ObjectSpace.dump_all file (allocation tracing on, so file/line/generation
# are in it) of about --objects live objects, or takes an existing one
# (--dump FILE), then runs Fathom.analyze_dump on it in a fresh process and
# prints each phase's wall and CPU time, MB/s, and the peak memory: the
# analyzer's own arrays (stats[:peak_bytes]) and the process's VmHWM (after
# each phase, and over a bare Ruby that loaded Fathom).
#
#   ruby -Ilib bench/dump.rb [--objects 2000000 | --mb 1000] [--keep DIR]
#   ruby -Ilib bench/dump.rb --dump FILE
#
# On a shared machine pin it (`taskset -c 0 ruby ...`) and read the CPU
# column: wall time is whatever the other processes leave over.
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
dump = nil
parsers = %w[auto]
OptionParser.new do |o|
  o.on("--objects N", Integer, "live objects in the generated dump (default 2,000,000: ~780 MB)") { |n| objects = n }
  o.on("--mb N", Integer, "generate a dump of about N MB (--objects N makes ~390 N bytes)") { |n| objects = n * 1_000_000 / 390 }
  o.on("--keep DIR", "write the generated dump there and keep it") { |d| keep = d }
  o.on("--dump FILE", "analyze this dump instead of generating one") { |f| dump = f }
  o.on("--parsers LIST", "comma-separated: auto,dom (dom: simdjson's DOM parser for every line)") { |l| parsers = l.split(",") }
end.parse!

lib = File.expand_path("../lib", __dir__)
dir = nil
if dump
  path = dump
  gen_s = nil
else
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
end
size = File.size(path)

analyzer = <<~RUBY
  require "fathom"
  require "json"
  t = Process.clock_gettime(Process::CLOCK_MONOTONIC)
  c = Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID)
  p = Fathom.analyze_dump(ARGV[0], progress: false, parser: ARGV[1].to_sym)
  total = Process.clock_gettime(Process::CLOCK_MONOTONIC) - t
  cpu = Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID) - c
  times = Process.times
  hwm = File.read("/proc/self/status")[/VmHWM:\\s+(\\d+)/, 1].to_i * 1024
  s = p.stats
  puts JSON.generate(total: total, cpu: cpu, user: times.utime, sys: times.stime, hwm: hwm, objects: s[:objects],
                     peak: s[:peak_bytes], phases: s[:phases_ns], cpus: s[:phases_cpu_ns], hwms: s[:phases_hwm_bytes],
                     profile: p.bytes.bytesize, reachable: s[:reachable_objects], input: s[:input_bytes])
RUBY
# Baseline: the same Ruby doing nothing but loading Fathom.
base = IO.popen([RbConfig.ruby, "-I#{lib}", "-e", 'require "fathom"; puts File.read("/proc/self/status")[/VmHWM:\s+(\d+)/, 1].to_i * 1024'], &:read).to_i

mb = ->(b) { format("%.1f MB", b / 1e6) }
puts "dump: #{path}, #{mb.(size)} on disk#{gen_s ? format(", generated in %.1f s", gen_s) : ""}"
parsers.each do |parser|
  out = IO.popen([RbConfig.ruby, "-I#{lib}", "-e", analyzer, path, parser], &:read)
  abort "analyzer failed (#{parser})" unless $?.success?
  r = JSON.parse(out, symbolize_names: true)
  n = r[:objects]
  # Rates per byte of JSON (uncompressed when the dump is gzipped).
  size = r[:input]
  puts "parser #{parser}: #{n} objects (#{r[:reachable]} reachable), #{mb.(size)} of JSON"
  puts format("  %-11s %9s %9s  %s", "phase", "wall", "cpu", "VmHWM at its end")
  r[:phases].each do |phase, ns|
    s = ns / 1e9
    cpu = r[:cpus][phase] / 1e9
    extra = phase == :parse ? format("  (%.0f MB/s wall, %.0f MB/s cpu)", size / 1e6 / s, size / 1e6 / cpu) : ""
    puts format("  %-11s %7.3f s %7.3f s  %s%s", phase, s, cpu, mb.(r[:hwms][phase]), extra)
  end
  puts format("  %-11s %7.3f s %7.3f s  (user %.3f s, sys %.3f s; %.0f MB/s; a 1 GB dump: ~%.1f s wall, ~%.1f s cpu)",
              "total", r[:total], r[:cpu], r[:user], r[:sys], size / 1e6 / r[:total], r[:total] * 1e9 / size,
              r[:cpu] * 1e9 / size)
  puts "  peak: analyzer arrays #{mb.(r[:peak])} = #{format("%.1f", r[:peak].to_f / n)} B/object; " \
       "process VmHWM #{mb.(r[:hwm])} = #{format("%.1f", (r[:hwm] - base).to_f / n)} B/object over a bare Ruby's #{mb.(base)}"
  puts "  profile: #{r[:profile]} bytes gzipped"
end
FileUtils.rm_rf(dir) if dir && !keep
