# frozen_string_literal: true

# Fathom's terminal reports next to memory_profiler's and stackprof's, on
# issue 43's app (test/fixtures/csv_import.rb: a CSV import with a leaky
# memo), with the wall and CPU time each run took. Not a test: it prints
# the reports and timings for a person to compare (the issue's closing
# note was made with it).
#
#   ruby -Ilib bench/report_peers.rb [--rows 40000] [--out DIR] [--peers memory_profiler,stackprof]
#
# The peers are gems (`gem install memory_profiler stackprof`, or a
# GEM_PATH that has them); a peer that is not installed is skipped. Each
# tool profiles the same program in a process of its own:
#   fathom --exact    fathom run --mode heap --exact, then report --by line / --by gem / --method
#   fathom sampled    fathom run --mode heap (the default), report --by line
#   fathom cpu        fathom run --mode cpu --interval 1ms, report --method
#   memory_profiler   MemoryProfiler.report { ... }.pretty_print
#   stackprof         StackProf.run(mode: :cpu, interval: 1000), stackprof --text and --method
require "optparse"
require "open3"
require "rbconfig"
require "fileutils"
require "tmpdir"

ROOT = File.expand_path("..", __dir__)
APP = File.join(ROOT, "test/fixtures/csv_import.rb")
FATHOM = [RbConfig.ruby, "-I#{File.join(ROOT, "lib")}", File.join(ROOT, "exe/fathom")].freeze

opts = { rows: 40_000, out: File.join(Dir.tmpdir, "fathom-report-peers"), peers: %w[memory_profiler stackprof] }
OptionParser.new do |o|
  o.on("--rows N", Integer, "CSV rows (default: 40000, the issue's)") { |v| opts[:rows] = v }
  o.on("--out DIR", "where the profiles and reports go") { |v| opts[:out] = v }
  o.on("--peers LIST", Array, "peers to run (default: memory_profiler,stackprof)") { |v| opts[:peers] = v }
end.parse!
FileUtils.mkdir_p(opts[:out])
ENV_PLAIN = { "CSV_IMPORT_ROWS" => opts[:rows].to_s, "RUBYOPT" => nil, "BUNDLE_GEMFILE" => nil }.freeze

# Runs a command; returns [stdout, stderr, wall seconds, CPU seconds of the
# child (user + system)].
def timed(env, *cmd)
  before = Process.clock_gettime(Process::CLOCK_MONOTONIC)
  cpu_before = Process.times
  out, err, status = Open3.capture3(env, *cmd)
  wall = Process.clock_gettime(Process::CLOCK_MONOTONIC) - before
  cpu_after = Process.times
  cpu = (cpu_after.cutime + cpu_after.cstime) - (cpu_before.cutime + cpu_before.cstime)
  warn "#{cmd.join(" ")} failed: #{err}" unless status.success?
  [out, err, wall, cpu]
end

def gem?(name)
  _, status = Open3.capture2e(RbConfig.ruby, "-e", "gem #{name.dump}; require #{name.dump}")
  status.success?
end

# Runs the block when the peer was asked for (--peers) and is installed;
# says it is not installed otherwise.
def peer(name, opts)
  return unless opts[:peers].include?(name)
  return section(name, "not installed (gem install #{name})") unless gem?(name)

  yield
end

def section(title, text, time = nil)
  puts "=" * 100
  puts "#{title}#{format("   (%.1f s wall, %.1f s CPU)", *time) if time}"
  puts "-" * 100
  puts text
end

def report(*args)
  out, err, wall, cpu = timed({}, *FATHOM, "report", *args)
  [out.empty? ? err : out, [wall, cpu]]
end

dir = opts[:out]
exact_base = File.join(dir, "exact")
_, err, *time = timed(ENV_PLAIN, *FATHOM, "run", "--mode", "heap", "--exact", "-o", "#{exact_base}.pb.gz", "--", RbConfig.ruby, APP)
section("fathom run --mode heap --exact", err, time)
%w[line gem].each do |by|
  text, t = report("#{exact_base}.pb.gz", "--by", by, "--top", "10")
  section("fathom report --by #{by} (exact)", text, t)
end
text, t = report("#{exact_base}.pb.gz", "--by", "gem", "--sample-index", "alloc_space", "--top", "10")
section("fathom report --by gem --sample-index alloc_space (exact)", text, t)
text, t = report("#{exact_base}.pb.gz", "--method", "CsvImport.report")
section("fathom report --method CsvImport.report (exact heap)", text, t)

sampled = File.join(dir, "sampled.pb.gz")
_, err, *time = timed(ENV_PLAIN, *FATHOM, "run", "--mode", "heap", "-o", sampled, "--", RbConfig.ruby, APP)
section("fathom run --mode heap (sampled)", err, time)
text, t = report(sampled, "--by", "line", "--top", "10")
section("fathom report --by line (sampled)", text, t)

cpu = File.join(dir, "cpu.pb.gz")
_, err, *time = timed(ENV_PLAIN, *FATHOM, "run", "--mode", "cpu", "--interval", "1ms", "-o", cpu, "--", RbConfig.ruby, APP)
section("fathom run --mode cpu --interval 1ms", err, time)
text, t = report(cpu, "--top", "10")
section("fathom report (cpu)", text, t)
text, t = report(cpu, "--method", "CsvImport.parse")
section("fathom report --method CsvImport.parse (cpu)", text, t)

_, _, *time = timed(ENV_PLAIN, RbConfig.ruby, APP)
section("no profiler", "", time)

peer("memory_profiler", opts) do
  file = File.join(dir, "memory_profiler.txt")
  code = "require 'memory_profiler'; load #{APP.dump}; " \
         "MemoryProfiler.report { CsvImport.run(#{opts[:rows]}) }.pretty_print(to_file: #{file.dump})"
  _, _, *time = timed(ENV_PLAIN, RbConfig.ruby, "-e", code)
  text = File.read(file)
  wanted = ["Total allocated", "Total retained", "allocated memory by gem", "retained memory by gem",
            "retained memory by location", "Retained String Report"]
  shown = text.split(/^(?=\S.*\n-{10,})/).select { |part| part.start_with?(*wanted) }.map { |part| part.lines.first(12).join }
  section("memory_profiler (its sections on gems, retained locations, strings)", shown.join("\n"), time)
end

peer("stackprof", opts) do
  dump = File.join(dir, "stackprof-cpu.dump")
  code = "require 'stackprof'; load #{APP.dump}; " \
         "StackProf.run(mode: :cpu, interval: 1000, out: #{dump.dump}) { CsvImport.run(#{opts[:rows]}) }"
  _, _, *time = timed(ENV_PLAIN, RbConfig.ruby, "-e", code)
  stackprof = [RbConfig.ruby, "-S", "stackprof"]
  out, = timed({}, *stackprof, dump, "--text", "--limit", "10")
  section("stackprof --text (cpu, 1 ms)", out, time)
  out, = timed({}, *stackprof, dump, "--method", "CsvImport.parse")
  section("stackprof --method CsvImport.parse", out)
end
