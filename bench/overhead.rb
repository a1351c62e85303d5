# frozen_string_literal: true

# Overhead of the profilers, as ratios against a baseline measured in the
# same invocation. Not a test: timings on a shared machine are noisy, so
# every configuration runs in its own fresh process, rounds are interleaved
# (baseline, sampled, exact, baseline, ...) and medians are compared. The
# cpu ratio compares the process's CPU time (timer thread included), which
# a busy neighbour disturbs less than wall time.
#
#   ruby -Ilib bench/overhead.rb [--rounds 7] [--workload alloc_mixed,deep_alloc] [--in-process]
#                                [--modes baseline,baseline_again,sampled,exact,gc,gc_hooks,gc_counters,gc_every,
#                                         cpu,cpu_1ms,stackprof_cpu_1ms,vernier_wall_1ms]
#                                [--cpu N | --no-pin] [--perf] [--other-lib DIR]
#
# Children are pinned to one CPU by default (taskset; the last CPU unless
# --cpu N; --no-pin turns it off), and the output says which. On this
# project's 2-vCPU VMs one vCPU has been seen running the same loop 1.75x
# slower than the other, steadily: unpinned, each run lands on either, and
# the medians mix two machines (issue 29: ±5% swings between runs).
#
# `--modes defaults` is the set issue 29 asks about: the heap, GC and CPU
# profilers as shipped, CPU at 1 ms, and stackprof (cpu, 1 ms) and vernier
# (wall, 1 ms) where they are installed (skipped otherwise; point GEM_PATH
# at a directory holding them).
#
# --perf: instead of timing, each child runs under `perf record -e cpu-clock`
# (no flush) and the table gives the share of its CPU samples spent on
# profiling: in fathom_ext.so, in the libruby functions Fathom calls
# (PERF_RUBY_FOR_FATHOM; their share in the baseline is subtracted) and in
# the kernel's signal and timer paths. A share within one process is far
# less disturbed by neighbours than a ratio of two processes' times; this
# machine's VMs expose no hardware counters (`perf stat -e instructions` is
# "not supported"), so it stands in for instruction counts. It sees only
# direct costs: an indirect one (a bigger heap, more GC) shows in the times.
#
# --other-lib DIR adds the modes `other` and `other_exact`: the default heap
# profiler (as `sampled`), or exact mode (as `exact`), loaded from another
# checkout's lib/ (built for this Ruby), to
# compare two builds of the sampler in one interleaved invocation, e.g.
# main's against a branch's: `git archive main | tar -x -C /tmp/main`,
# build it there, then `--modes baseline,sampled,other --other-lib /tmp/main/lib`.
#
# Modes: sampled / exact = the heap profiler; gc = the GC profiler as shipped
# (gc_source: :auto, i.e. Ruby's GC counters on Ruby < 3.3 and the hooks on
# 3.3+); gc_hooks / gc_counters = each GC source, whatever the Ruby;
# gc_every = the hooks with coalescing off (every GC step becomes a period),
# to show what coalescing saves.
require "etc"
require "optparse"
require "rbconfig"
require_relative "timed_run"
require_relative "workloads"
require_relative "in_process"

WORKLOADS = {
  "alloc_mixed" => -> { BenchWorkloads.alloc_mixed },  # bench/workloads.rb
  # ~18M allocations/s on Debian's Ruby 3.1: the worst case for any hook.
  "alloc_loop" => lambda do
    i = 0
    while i < 6_000_000
      Object.new
      i += 1
    end
  end,
  # RMP's benchmark shape: deep recursion, classes holding large strings,
  # about half of the objects retained.
  "rmp_like" => lambda do
    holder = Class.new do
      attr_reader :payload

      def initialize(size)
        @payload = "x" * size
      end
    end
    retained = []
    recurse = lambda do |depth, n|
      if depth.zero?
        n.times { |k| (k.even? ? retained : []) << holder.new(256 + (k % 7) * 64) }
      else
        recurse.call(depth - 1, n)
      end
    end
    200.times { recurse.call(60, 1_000) }
    retained.size
  end,
  "deep_alloc" => -> { BenchWorkloads.deep_alloc },  # ~150 frames deep (bench/workloads.rb)
  # Two threads handing work to each other through Queues: every hand-off
  # passes the GVL (tens of thousands of handovers a second), each side
  # allocating a little. What the GVL hook costs where it runs most: on 3.2+
  # the heap sampler's pacer reads the thread CPU clock at each handover.
  "gvl_pingpong" => lambda do
    ping = Queue.new
    pong = Queue.new
    other = Thread.new do
      while (n = ping.pop)
        pong << "r#{n}"
      end
    end
    50_000.times { |i| ping << i; pong.pop }
    ping << nil
    other.join
  end,
}.freeze

PROFILERS = {
  "baseline" => nil,
  # A second baseline (A/A): the ratio it gets is this bench's own noise at
  # the chosen round count, the resolution any bound below it can be read to.
  "baseline_again" => nil,
  "sampled" => -> { Fathom::HeapProfiler.new },
  "other" => -> { Fathom::HeapProfiler.new }, # from --other-lib
  "other_exact" => -> { Fathom::HeapProfiler.new(exact: true) }, # from --other-lib
  "exact" => -> { Fathom::HeapProfiler.new(exact: true) },
  "gc" => -> { Fathom::GcProfiler.new },
  "gc_hooks" => -> { Fathom::GcProfiler.new(gc_source: :hooks) },
  "gc_counters" => -> { Fathom::GcProfiler.new(gc_source: :counters) },
  "gc_every" => -> { Fathom::GcProfiler.new(coalesce: 0) },
  "cpu" => -> { Fathom::CpuProfiler.new(mode: :cpu) },
  "cpu_1ms" => -> { Fathom::CpuProfiler.new(mode: :cpu, interval: "1ms") },
  "stackprof_cpu_1ms" => -> { PeerRun.new(:stackprof) },
  "vernier_wall_1ms" => -> { PeerRun.new(:vernier) },
}.freeze
PEERS = { "stackprof_cpu_1ms" => "stackprof", "vernier_wall_1ms" => "vernier" }.freeze
DEFAULT_SET = %w[baseline sampled gc cpu cpu_1ms stackprof_cpu_1ms vernier_wall_1ms].freeze

# stackprof (cpu, 1 ms) and vernier (wall, 1 ms) behind the profilers'
# start/stop/flush shape, so the table shows Fathom beside them.
class PeerRun
  def initialize(which)
    @which = which
    require which.to_s
  end

  def start
    if @which == :stackprof
      StackProf.start(mode: :cpu, interval: 1000, raw: false)
    else
      Vernier.start_profile(mode: :wall, interval: 1000)
    end
  end

  def stop
    @result = @which == :stackprof ? (StackProf.stop; StackProf.results) : Vernier.stop_profile
  end

  def flush = nil
end

def child(mode, workload, lib)
  $LOAD_PATH.unshift(lib)
  # Loaded in every mode, baseline included: what is measured is the cost of
  # profiling, not of a larger heap with the gem's code in it.
  require "fathom"
  run = TimedRun.measure(PROFILERS.fetch(mode), WORKLOADS.fetch(workload))
  flush_s = 0.0
  if run.profiler && !ENV["FATHOM_BENCH_NO_FLUSH"] # --perf: the share of the run, not of the flush after it
    profile = run.profiler.flush
    flush_s = profile.stats[:flush_ns].to_i / 1e9 if profile.respond_to?(:stats)
  end
  puts format("%.6f %.6f %.6f", run.wall, flush_s, run.cpu)
end

# --in-process (bench/in_process.rb): every mode in one process per
# workload, each between two baseline runs.
def child_in_process(modes, workload, lib, rounds)
  $LOAD_PATH.unshift(lib)
  require "fathom"
  BenchInProcess.print(BenchInProcess.ratios(PROFILERS, modes, WORKLOADS.fetch(workload), rounds))
end

if ARGV[0] == "--child"
  child(ARGV[1], ARGV[2], ARGV[3])
  exit
elsif ARGV[0] == "--child-in-process"
  child_in_process(ARGV[1].split(","), ARGV[2], ARGV[3], Integer(ARGV[4]))
  exit
end

rounds = 7
workloads = WORKLOADS.keys
modes = %w[baseline sampled exact]
pin_cpu = Etc.nprocessors - 1
other_lib = nil
perf = false
in_process = false
OptionParser.new do |o|
  o.on("--rounds N", Integer) { |n| rounds = n }
  o.on("--workload LIST", Array) { |l| workloads = l }
  o.on("--modes LIST", Array, "or `defaults`: #{DEFAULT_SET.join(",")}") { |l| modes = l == ["defaults"] ? DEFAULT_SET.dup : l }
  o.on("--cpu N", Integer, "pin the children to this CPU (taskset; default the last CPU)") { |n| pin_cpu = n }
  o.on("--no-pin", "do not pin the children") { pin_cpu = nil }
  o.on("--perf", "share of perf samples spent on profiling, instead of times") { perf = true }
  o.on("--in-process", "every mode in one process per workload, between baseline runs (bench/in_process.rb)") do
    in_process = true
  end
  o.on("--other-lib DIR", "lib/ of another checkout, for the mode other") { |d| other_lib = File.expand_path(d) }
end.parse!
modes.unshift("baseline") unless modes.include?("baseline")
unknown = modes - PROFILERS.keys
abort "unknown mode(s) #{unknown.join(", ")}; known: #{PROFILERS.keys.join(", ")}" unless unknown.empty?
# The modes that load Fathom from --other-lib.
OTHER_MODES = %w[other other_exact].freeze
abort "the modes other and other_exact need --other-lib DIR" if modes.intersect?(OTHER_MODES) && !other_lib
PEERS.each do |mode, gem|
  next if !modes.include?(mode) || system(RbConfig.ruby, "-e", "require '#{gem}'", err: File::NULL)

  warn "#{gem} is not installed for this Ruby: the mode #{mode} is skipped"
  modes -= [mode]
end
MODES = modes.freeze
PERF = perf
OWN_LIB = File.expand_path("../lib", __dir__)

def median(xs) = xs.sort[xs.size / 2]

if in_process
  abort "--in-process runs Fathom's own lib only (no --other-lib)" if modes.intersect?(OTHER_MODES)
  pin = pin_cpu ? ["taskset", "-c", pin_cpu.to_s] : []
  BenchInProcess.report(
    ->(workload) { [*pin, RbConfig.ruby, __FILE__, "--child-in-process", modes.join(","), workload, OWN_LIB, rounds.to_s] },
    workloads,
    "Fathom overhead in one process (Ruby #{RUBY_VERSION}, #{rounds} rounds, each mode between two baseline runs, " \
    "#{pin_cpu ? "pinned to CPU #{pin_cpu} with taskset" : "NOT pinned"})"
  )
  exit
end

# libruby functions that run only on Fathom's behalf in these children
# (stack walks, the census's heap walk, counters read by the hooks, hooks
# armed and removed, postponed jobs), and the kernel's signal/timer paths.
# A stack walk's line numbers and method entries are separate symbols on
# 3.3 (thread_profile_frames calls rb_iseq_line_no and
# rb_vm_frame_method_entry; on deep stacks the lines are most of the walk).
PERF_RUBY_FOR_FATHOM = /profile_frames|iseq_line_no|vm_frame_method_entry|postponed_job|gc_stat|gc_info_decode|
                        latest_gc_info|objspace_each|each_location|internal_object_p|event_hook|tracearg|memsize_of|
                        ractor_local/x
PERF_KERNEL_SIGNALS = /signal|sigreturn|sigcontext|rt_frame|sig_info|sigprocmask|tgkill|timer_settime|posix_cpu|
                       itimer|clock_gettime|send_sig/x

# One child under perf record: [samples, fathom_ext.so, libruby for Fathom, kernel signals] in samples.
def perf_child(cmd, env)
  data = "/tmp/fathom-overhead-#{Process.pid}.perf"
  system(env, "perf", "record", "-q", "-e", "cpu-clock", "-F", "1999", "-o", data, "--", *cmd,
         out: File::NULL, err: File::NULL) or raise "perf record failed: #{cmd.join(" ")}"
  report = IO.popen(["perf", "report", "-i", data, "--stdio", "-n", "--sort", "dso,sym", "-q"], err: File::NULL, &:read)
  total = own = ruby = kernel = 0
  report.each_line do |line|
    _pct, count, dso, _kind, sym = line.split(" ", 5)
    next unless sym

    n = count.to_i
    total += n
    if dso == "fathom_ext.so" then own += n
    elsif dso.start_with?("libruby") && sym =~ PERF_RUBY_FOR_FATHOM then ruby += n
    elsif dso.include?("kernel") && sym =~ PERF_KERNEL_SIGNALS then kernel += n
    end
  end
  [total, own, ruby, kernel]
ensure
  File.delete(data) if data && File.exist?(data)
end

puts "Fathom overhead benchmark (Ruby #{RUBY_VERSION}, #{rounds} interleaved rounds, fresh process per run, " \
     "#{pin_cpu ? "pinned to CPU #{pin_cpu} with taskset" : "NOT pinned"})"
if PERF
  puts "--perf: share of each child's cpu-clock samples spent on profiling (medians of #{rounds}; no flush)"
  workloads.each do |workload|
    shares = Hash.new { |h, k| h[k] = [] }
    rounds.times do |r|
      (r.even? ? MODES : MODES.reverse).each do |mode|
        pin = pin_cpu ? ["taskset", "-c", pin_cpu.to_s] : []
        lib = OTHER_MODES.include?(mode) ? other_lib : OWN_LIB
        shares[mode] << perf_child([*pin, RbConfig.ruby, __FILE__, "--child", mode, workload, lib], { "FATHOM_BENCH_NO_FLUSH" => "1" })
      end
    end
    pct = ->(rows, i) { median(rows.map { |row| 100.0 * row[i] / row[0] }) }
    base = (1..3).map { |i| pct.(shares["baseline"], i) }
    puts
    puts "#{workload}:"
    MODES.each do |mode|
      own, ruby, kernel = (1..3).map { |i| pct.(shares[mode], i) }
      ruby_net = ruby - base[1]
      kernel_net = kernel - base[2]
      puts format("  %-17s direct %5.2f%%  (fathom_ext %5.2f%%, libruby for Fathom %+5.2f%%, kernel signals/timers %+5.2f%%; " \
                  "%d samples)", mode, own + ruby_net + kernel_net, own, ruby_net, kernel_net, median(shares[mode].map(&:first)))
    end
  end
  exit
end

workloads.each do |workload|
  times = Hash.new { |h, k| h[k] = [] }
  cpu = Hash.new { |h, k| h[k] = [] }
  rounds.times do |r|
    order = r.even? ? MODES : MODES.reverse
    order.each do |mode|
      pin = pin_cpu ? ["taskset", "-c", pin_cpu.to_s] : []
      lib = OTHER_MODES.include?(mode) ? other_lib : OWN_LIB
      out = IO.popen([*pin, RbConfig.ruby, __FILE__, "--child", mode, workload, lib], &:read)
      raise "child #{mode}/#{workload} failed" unless $?.success?
      run_s, _flush_s, cpu_s = out.split.map(&:to_f)
      times[mode] << run_s
      cpu[mode] << cpu_s
    end
  end
  base = median(times["baseline"])
  puts
  puts "#{workload}:"
  base_min = times["baseline"].min
  base_cpu = median(cpu["baseline"])
  MODES.each do |mode|
    m = median(times[mode])
    # paired: the median of each round's own CPU ratio to that round's
    # baseline (adjacent runs), steadier when the vCPU's speed drifts.
    paired = median(cpu[mode].zip(cpu["baseline"]).map { |c, b| c / b })
    puts format("  %-17s median %7.3fs ratio %.3fx | min %7.3fs ratio %.3fx | cpu ratio %.3fx | paired cpu %.3fx  (runs: %s)",
                mode, m, m / base, times[mode].min, times[mode].min / base_min, median(cpu[mode]) / base_cpu, paired,
                times[mode].map { |t| format("%.3f", t) }.join(" "))
  end
end
