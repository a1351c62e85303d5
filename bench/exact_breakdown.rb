# frozen_string_literal: true

# Where exact mode's per-allocation cost goes, in instructions (callgrind):
# deterministic, so it can be compared across commits on a shared machine
# where timings cannot. Runs N Object.new in a loop without Fathom and
# under HeapProfiler.new(exact: true), each under valgrind, and prints the
# difference per allocation with the inclusive cost of the parts
# (docs/internals/heap-lifecycle.md, "Exact mode").
#
#   ruby -Ilib bench/exact_breakdown.rb [--allocations 300000]
#
# Needs valgrind (apt install valgrind). Takes about a minute.
require "optparse"
require "rbconfig"
require "tmpdir"

if ARGV[0] == "--child"
  $LOAD_PATH.unshift(File.expand_path("../lib", __dir__))
  require "fathom"
  profiler = ARGV[1] == "exact" ? Fathom::HeapProfiler.new(exact: true) : nil
  GC.start
  profiler&.start
  i = 0
  n = Integer(ARGV[2])
  while i < n
    Object.new
    i += 1
  end
  profiler&.stop
  exit
end

allocations = 300_000
OptionParser.new { |o| o.on("--allocations N", Integer) { |n| allocations = n } }.parse!

abort "bench/exact_breakdown.rb: valgrind is not installed (apt install valgrind)" unless system("which valgrind > /dev/null")

PARTS = {
  "hook dispatch (all hooks, incl. ours)" => /\brb_exec_event_hooks\b/,
  "NEWOBJ hook" => /NewobjHook/,
  "  rb_profile_frames" => /\brb_profile_frames\b/,
  "  stack interning (hash)" => /StackTable::HashStack/,
  "commit job" => /CommitPending/,
  "  object map insert" => /ObjectMap::Insert/,
  "  rb_obj_memsize_of" => /\brb_obj_memsize_of\b/,
  "FREEOBJ hook" => /FreeobjHook/,
  "folding freed records" => /SampleStore::DrainFreed/,
}.freeze

Dir.mktmpdir do |dir|
  totals = {}
  inclusive = {}
  %w[base exact].each do |mode|
    out = File.join(dir, "#{mode}.out")
    log = IO.popen(["valgrind", "--tool=callgrind", "--callgrind-out-file=#{out}", RbConfig.ruby, __FILE__,
                    "--child", mode, allocations.to_s], err: %i[child out], &:read)
    totals[mode] = log[/Collected : (\d+)/, 1].to_i
    next unless mode == "exact"

    lines = IO.popen(["callgrind_annotate", "--inclusive=yes", out], &:read).lines
    PARTS.each do |name, pattern|
      # The first (largest) line naming the function; callgrind lists
      # recursion levels ("'2") separately, the first is the outermost.
      line = lines.find { |l| l =~ /\A\s*[\d,]+ \(/ && l =~ pattern && l !~ /'\d/ }
      inclusive[name] = line ? line[/\A\s*([\d,]+)/, 1].delete(",").to_i : 0
    end
  end
  per = ->(ir) { ir.to_f / allocations }
  puts "exact mode, #{allocations} allocations, Ruby #{RUBY_VERSION}: instructions per allocation"
  puts format("  %-40s %8.0f", "total added (exact - base)", per.(totals["exact"] - totals["base"]))
  inclusive.each { |name, ir| puts format("  %-40s %8.0f", name, per.(ir)) }
end
