# frozen_string_literal: true

# Where exact mode's per-allocation cost goes, two ways.
#
# 1. Instructions (callgrind, the default): deterministic, so it can be
#    compared across commits on a shared machine where timings cannot. Runs
#    N Object.new in a loop without Fathom and under
#    HeapProfiler.new(exact: true), each under valgrind, and prints the
#    difference per allocation with the inclusive cost of the parts
#    (docs/internals/heap-lifecycle.md, "Exact mode").
#
#      ruby -Ilib bench/exact_breakdown.rb [--allocations 300000] [--depth 1]
#
#    Needs valgrind (apt install valgrind). Takes about a minute.
#
# 2. The floor in time (--floor): what Ruby's hooks cost before Fathom does
#    anything, at several stack depths, beside exact mode. A throwaway C
#    extension (public API only, compiled into a temporary directory with
#    mkmf) installs NEWOBJ + FREEOBJ hooks that do nothing ("empty"), or
#    that also capture the stack with rb_profile_frames into a static buffer
#    as Fathom's hook does (max_depth + 1 = 129 frames at most, lines
#    included: "capture"; the same without lines: "nolines", which shows
#    what the line numbers cost: rb_profile_frames computes each frame's
#    line from its pc, about 40% of the capture at 129 frames; lines for the
#    16 innermost frames only, then a second call without: "lines16"; the
#    capture with the NEWOBJ hook alone, no FREEOBJ hook: "nofree", which
#    shows what FREEOBJ costs in the sweep).
#    Each configuration runs in a fresh process pinned
#    with taskset (--cpu, default 1), rounds interleaved with the baseline,
#    medians of process CPU time; ratios are against the baseline at the
#    same depth.
#
#      ruby -Ilib bench/exact_breakdown.rb --floor [--rounds 7] [--cpu 1]
#                                          [--depths 10,50,150] [--allocations 2000000]
#
#    The depth is the number of Ruby frames under the allocating loop
#    (recursion of one method), so "150" allocates ~152 frames deep.
require "optparse"
require "rbconfig"
require "tmpdir"

FLOOR_C = <<~C
  #include <ruby.h>
  #include <ruby/debug.h>
  static VALUE frames[129];
  static int lines[129];
  static int capture;
  static void newobj(VALUE tpval, void *data) {
    (void)tpval; (void)data;
    if (capture == 1 || capture == 4) rb_profile_frames(0, 129, frames, lines);
    else if (capture == 2) rb_profile_frames(0, 129, frames, NULL);
    else if (capture == 3) {
      int n = rb_profile_frames(0, 16, frames, lines);
      if (n == 16) rb_profile_frames(16, 113, frames + 16, NULL);
    }
  }
  static void freeobj(VALUE tpval, void *data) { (void)tpval; (void)data; }
  static VALUE tps[2];
  static VALUE floor_start(VALUE self, VALUE cap) {
    capture = NUM2INT(cap);
    tps[0] = rb_tracepoint_new(0, RUBY_INTERNAL_EVENT_NEWOBJ, newobj, 0);
    tps[1] = rb_tracepoint_new(0, RUBY_INTERNAL_EVENT_FREEOBJ, freeobj, 0);
    rb_gc_register_address(&tps[0]);
    rb_gc_register_address(&tps[1]);
    rb_tracepoint_enable(tps[0]);
    if (capture != 4) rb_tracepoint_enable(tps[1]);  /* "nofree": NEWOBJ alone */
    return Qnil;
  }
  static VALUE floor_stop(VALUE self) {
    rb_tracepoint_disable(tps[0]);
    rb_tracepoint_disable(tps[1]);
    return Qnil;
  }
  void Init_exact_floor(void) {
    VALUE m = rb_define_module("ExactFloor");
    rb_define_module_function(m, "start", floor_start, 1);
    rb_define_module_function(m, "stop", floor_stop, 0);
  }
C

# Builds the floor extension for this Ruby into dir; returns its directory.
def build_floor_ext(dir)
  File.write(File.join(dir, "exact_floor.c"), FLOOR_C)
  File.write(File.join(dir, "extconf.rb"), "require 'mkmf'\ncreate_makefile('exact_floor')\n")
  ok = Dir.chdir(dir) do
    system(RbConfig.ruby, "extconf.rb", out: File::NULL) && system("make", out: File::NULL)
  end
  abort "bench/exact_breakdown.rb: could not build the floor extension in #{dir}" unless ok
  dir
end

def down(depth, &blk) = depth.zero? ? yield : down(depth - 1, &blk)

if ARGV[0] == "--child"
  $LOAD_PATH.unshift(File.expand_path("../lib", __dir__))
  require "fathom"
  mode = ARGV[1]
  n = Integer(ARGV[2])
  depth = Integer(ARGV[3] || "0")
  profiler = mode == "exact" ? Fathom::HeapProfiler.new(exact: true) : nil
  floor = { "empty" => 0, "capture" => 1, "nolines" => 2, "lines16" => 3, "nofree" => 4 }[mode]
  if floor
    $LOAD_PATH.unshift(ARGV[4])
    require "exact_floor"
  end
  GC.start
  c0 = Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID)
  profiler&.start
  ExactFloor.start(floor) if floor
  down(depth) do
    i = 0
    while i < n
      Object.new
      i += 1
    end
  end
  ExactFloor.stop if floor
  profiler&.stop
  c1 = Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID)
  puts c1 - c0
  exit
end

def median(xs) = xs.sort[xs.size / 2]

def floor_table(rounds, cpu, depths, allocations)
  modes = %w[baseline empty capture nolines lines16 nofree exact]
  Dir.mktmpdir do |dir|
    ext = build_floor_ext(dir)
    pin = ["taskset", "-c", cpu.to_s]
    puts "exact-mode floor, Ruby #{RUBY_VERSION}, #{allocations} Object.new per run, pinned to CPU #{cpu}, " \
         "#{rounds} interleaved rounds, median process CPU time (a shared machine: expect a few % of noise)"
    puts format("  %-6s %10s %9s %9s %9s %9s %9s %9s", "depth", "baseline", "empty", "capture", "nolines", "lines16",
                "nofree", "exact")
    depths.each do |depth|
      t = Hash.new { |h, k| h[k] = [] }
      rounds.times do |r|
        (r.even? ? modes : modes.reverse).each do |mode|
          out = IO.popen([*pin, RbConfig.ruby, __FILE__, "--child", mode, allocations.to_s, depth.to_s, ext], &:read)
          raise "child #{mode} failed" unless $?.success?

          t[mode] << Float(out)
        end
      end
      base = median(t["baseline"])
      puts format("  %-6d %9.3fs %8.2fx %8.2fx %8.2fx %8.2fx %8.2fx %8.2fx", depth, base,
                  *%w[empty capture nolines lines16 nofree exact].map { |m| median(t[m]) / base })
    end
  end
end

allocations = nil
depth = 0
floor = false
rounds = 7
cpu = 1
depths = [10, 50, 150]
OptionParser.new do |o|
  o.on("--allocations N", Integer) { |n| allocations = n }
  o.on("--depth N", Integer, "callgrind: frames under the loop") { |n| depth = n }
  o.on("--floor", "time the floor (empty hooks, hooks + capture) beside exact mode") { floor = true }
  o.on("--rounds N", Integer) { |n| rounds = n }
  o.on("--cpu N", Integer) { |n| cpu = n }
  o.on("--depths LIST", Array) { |l| depths = l.map { |d| Integer(d) } }
end.parse!

if floor
  floor_table(rounds, cpu, depths, allocations || 2_000_000)
  exit
end
allocations ||= 300_000

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
                    "--child", mode, allocations.to_s, depth.to_s], err: %i[child out], &:read)
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
  puts "exact mode, #{allocations} allocations #{depth} frames deep, Ruby #{RUBY_VERSION}: instructions per allocation"
  puts format("  %-40s %8.0f", "total added (exact - base)", per.(totals["exact"] - totals["base"]))
  inclusive.each { |name, ir| puts format("  %-40s %8.0f", name, per.(ir)) }
end
