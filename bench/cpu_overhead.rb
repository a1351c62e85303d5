# frozen_string_literal: true

# Overhead of the CPU/wall profiler, as ratios against a baseline measured
# in the same invocation. Not a test. Every configuration runs in its own
# fresh process, rounds are interleaved (forward, then reversed order) and
# medians compared; the cpu ratio compares the process's CPU time, which a
# busy neighbour disturbs less than wall time. The ratios cover start, the
# work and stop; "steady" covers the work alone (what a profiler left on
# for hours costs), and "start+stop" the CPU the rest took.
#
#   ruby -Ilib bench/cpu_overhead.rb [--rounds 7] [--workload single,threads4,alloc_mixed,deep_alloc]
#                                    [--modes baseline,cpu,wall,cpu_1ms,wall_1ms,stackprof_cpu_1ms,stackprof_wall_1ms,
#                                             vernier_wall_1ms,cpu_native,wall_native,cpu_native_1ms]
#                                    [--cpu N | --no-pin] [--scale K] [--every S] [--in-process]
#
# Children are pinned to one CPU by default (taskset; the last CPU unless
# --cpu N; --no-pin turns it off), and the output says which: one vCPU of
# this project's VMs runs the same loop much slower than the other.
#
# --scale K multiplies each workload's work (default 1: ~0.9 s and ~0.5 s);
# a longer run shrinks the weight of start/stop (one timer per thread, the
# drain thread) and of the machine's noise against the per-sample cost.
#
# --every S: the always_on_* modes flush every S seconds (default 60, as
# FATHOM_EVERY's default). --every 1 puts a flush in each second of the
# run, 60 times the default's rate: a stress of the flush, not the default.
#
# single:   one thread, CPU-bound (method calls, small allocations)
# threads4: the acceptance program's shape: 2 CPU-bound threads, one asleep,
#           one blocked on a pipe (wall mode samples all four)
# alloc_mixed: issue 29's allocation-heavy loop (2M iterations of a Hash,
#           Strings and an Array, 1% kept): GC runs often, so samples land
#           in GC and the handler meets Ruby 3.3's allocation path
# deep_alloc: ~150 method frames deep, allocating small strings: each
#           sample walks every frame
# stackprof_* need `gem install stackprof`, vernier_wall_1ms `gem install
# vernier` (Ruby 3.2.1+); each is skipped when missing (GEM_PATH may point
# at a directory holding them).
require "etc"
require "optparse"
require "rbconfig"
require_relative "workloads"
require_relative "in_process"
require_relative "timed_run"

def fib(n) = n < 2 ? n : fib(n - 1) + fib(n - 2)

SCALE = Integer(ENV.fetch("FATHOM_BENCH_SCALE", "1"))

WORKLOADS = {
  "single" => lambda do
    acc = 0
    (400 * SCALE).times { acc += fib(22); acc += [1, 2, 3].map { |x| x * 2 }.sum }
    acc
  end,
  "threads4" => lambda do
    r, w = IO.pipe
    busy = 2.times.map { Thread.new { (200 * SCALE).times { fib(21) } } }
    sleeper = Thread.new { sleep }
    reader = Thread.new { r.read(1) }
    busy.each(&:join)
    w.write("x")
    reader.join
    sleeper.kill.join
  end,
  "alloc_mixed" => -> { BenchWorkloads.alloc_mixed(SCALE) },
  "deep_alloc" => -> { BenchWorkloads.deep_alloc(SCALE) },
}.freeze

PROFILERS = {
  "baseline" => nil,
  "cpu" => -> { Fathom::CpuProfiler.new(mode: :cpu) },
  "wall" => -> { Fathom::CpuProfiler.new(mode: :wall) },
  "cpu_1ms" => -> { Fathom::CpuProfiler.new(mode: :cpu, interval: "1ms") },
  "wall_1ms" => -> { Fathom::CpuProfiler.new(mode: :wall, interval: "1ms") },
  # --native: a C-stack unwind per sample, and weaving at flush.
  "cpu_native" => -> { Fathom::CpuProfiler.new(mode: :cpu, native: true) },
  "wall_native" => -> { Fathom::CpuProfiler.new(mode: :wall, native: true) },
  "cpu_native_1ms" => -> { Fathom::CpuProfiler.new(mode: :cpu, interval: "1ms", native: true) },
  # Always-on CPU as FATHOM_MODE=cpu runs it (default 10 ms interval), with
  # a flush every --every seconds (default 60, as FATHOM_EVERY's) handed to
  # a sink (what FATHOM_PUSH's client gets; the sending itself is another
  # thread's and a socket's, not measured). The run's stop flushes once
  # more, inside the timed region: one flush per run, where the default
  # makes one a minute.
  "always_on_cpu" => -> { AlwaysOnRun.new(:cpu) },
  "stackprof_cpu_1ms" => -> { StackprofRun.new(:cpu) },
  "stackprof_wall_1ms" => -> { StackprofRun.new(:wall) },
  "vernier_wall_1ms" => -> { VernierRun.new },
}.freeze

# Fathom::AlwaysOn behind the same start/stop/flush shape: its profiles go
# to a sink that counts them (flush reports how many were delivered).
class AlwaysOnRun
  Sink = Struct.new(:deliveries) do
    def deliver(_profile, mode:, from_ns:, until_ns:) = self.deliveries += 1
    def stop(timeout:) = nil
    def after_fork_child = nil
  end

  def initialize(mode)
    @sink = Sink.new(0)
    @always_on = Fathom::AlwaysOn.new(modes: [mode], sinks: [@sink], every: Integer(ENV.fetch("FATHOM_BENCH_EVERY", "60")))
  end

  def start = @always_on.start
  def stop = @always_on.stop
  def flush = { samples: @sink.deliveries }
end

# stackprof behind the same start/stop/flush shape.
class StackprofRun
  def initialize(mode)
    require "stackprof"
    @mode = mode
  end

  def start = StackProf.start(mode: @mode, interval: 1000, raw: false)
  def stop = StackProf.stop
  def flush = StackProf.results
end

# vernier (wall mode, 1 ms) behind the same shape.
class VernierRun
  def initialize = require("vernier")
  def start = Vernier.start_profile(mode: :wall, interval: 1000)
  def stop = (@result = Vernier.stop_profile)
  def flush = { samples: @result.total_samples }
end

# In every mode, baseline included: what is compared is a profiler running
# or not, with the same code loaded (loading always-on's files alone grows
# the heap each GC walks, and moved a 1 s run by ~1%).
def load_fathom
  $LOAD_PATH.unshift(File.expand_path("../lib", __dir__))
  require "fathom"
  require "fathom/always_on/always_on"
end

def child(mode, workload)
  load_fathom
  run = TimedRun.measure(PROFILERS.fetch(mode), WORKLOADS.fetch(workload))
  samples = 0
  if run.profiler
    result = run.profiler.flush
    samples = result.respond_to?(:stats) ? result.stats[:samples].to_i : result[:samples].to_i
  end
  puts format("%.6f %.6f %d %.6f", run.wall, run.cpu, samples, run.work_cpu)
end

# --in-process (bench/in_process.rb): every mode in one process per
# workload, each between two baseline runs.
def child_in_process(modes, workload, rounds)
  load_fathom
  BenchInProcess.print(BenchInProcess.ratios(PROFILERS, modes, WORKLOADS.fetch(workload), rounds))
end

if ARGV[0] == "--child"
  child(ARGV[1], ARGV[2])
  exit
elsif ARGV[0] == "--child-in-process"
  child_in_process(ARGV[1].split(","), ARGV[2], Integer(ARGV[3]))
  exit
end

rounds = 7
workloads = WORKLOADS.keys
modes = %w[baseline cpu wall cpu_1ms wall_1ms stackprof_cpu_1ms stackprof_wall_1ms vernier_wall_1ms]
pin_cpu = Etc.nprocessors - 1
in_process = false
OptionParser.new do |o|
  o.on("--rounds N", Integer) { |n| rounds = n }
  o.on("--workload LIST", Array) { |l| workloads = l }
  o.on("--modes LIST", Array) { |l| modes = l }
  o.on("--cpu N", Integer, "pin the children to this CPU (taskset; default the last CPU)") { |n| pin_cpu = n }
  o.on("--no-pin", "do not pin the children") { pin_cpu = nil }
  o.on("--scale K", Integer, "multiply each workload's work by K") { |k| ENV["FATHOM_BENCH_SCALE"] = k.to_s }
  o.on("--in-process", "every mode in one process per workload, between baseline runs (bench/in_process.rb)") do
    in_process = true
  end
  o.on("--every S", Integer, "always_on_* modes: flush every S seconds (default 60, FATHOM_EVERY's default)") do |s|
    ENV["FATHOM_BENCH_EVERY"] = s.to_s
  end
end.parse!
modes.unshift("baseline") unless modes.include?("baseline")
unknown = modes - PROFILERS.keys
abort "unknown mode(s) #{unknown.join(", ")}; known: #{PROFILERS.keys.join(", ")}" unless unknown.empty?
{ "stackprof" => %w[stackprof_cpu_1ms stackprof_wall_1ms], "vernier" => %w[vernier_wall_1ms] }.each do |gem, its|
  next if (modes & its).empty? || system(RbConfig.ruby, "-e", "require '#{gem}'", err: File::NULL)

  warn "#{gem} is not installed for this Ruby: its modes are skipped"
  modes -= its
end

def median(xs) = xs.sort[xs.size / 2]

# The headers' word on the always-on modes' flush interval.
always_on_note = modes.any? { |m| m.start_with?("always_on") } ? ", always-on flushes every #{ENV.fetch("FATHOM_BENCH_EVERY", "60")} s" : ""

if in_process
  pin = pin_cpu ? ["taskset", "-c", pin_cpu.to_s] : []
  BenchInProcess.report(
    ->(workload) { [*pin, RbConfig.ruby, __FILE__, "--child-in-process", modes.join(","), workload, rounds.to_s] },
    workloads,
    "Fathom CPU/wall overhead in one process (Ruby #{RUBY_VERSION}, #{rounds} rounds, each mode between two baseline " \
    "runs, #{pin_cpu ? "pinned to CPU #{pin_cpu} with taskset" : "NOT pinned"}" \
    "#{always_on_note})"
  )
  exit
end

puts "Fathom CPU/wall overhead (Ruby #{RUBY_VERSION}, #{rounds} interleaved rounds, fresh process per run, " \
     "#{pin_cpu ? "pinned to CPU #{pin_cpu} with taskset" : "NOT pinned"}" \
     "#{always_on_note})"
workloads.each do |workload|
  times = Hash.new { |h, k| h[k] = [] }
  cpu = Hash.new { |h, k| h[k] = [] }
  work = Hash.new { |h, k| h[k] = [] }
  samples = Hash.new { |h, k| h[k] = [] }
  rounds.times do |r|
    (r.even? ? modes : modes.reverse).each do |mode|
      pin = pin_cpu ? ["taskset", "-c", pin_cpu.to_s] : []
      out = IO.popen([*pin, RbConfig.ruby, __FILE__, "--child", mode, workload], &:read)
      raise "child #{mode}/#{workload} failed" unless $?.success?
      run_s, cpu_s, n, work_s = out.split
      times[mode] << run_s.to_f
      cpu[mode] << cpu_s.to_f
      work[mode] << work_s.to_f
      samples[mode] << n.to_i
    end
  end
  base = median(times["baseline"])
  base_cpu = median(cpu["baseline"])
  puts
  puts "#{workload} (baseline median #{format("%.3f", base)}s):"
  modes.each do |mode|
    m = median(times[mode])
    # min/min too: on a vCPU whose speed jumps between two levels the
    # fastest runs of each mode are the ones measured at the same speed.
    # paired: the median of each round's own ratio to that round's
    # baseline (adjacent runs): steadier when the vCPU's speed drifts
    # between rounds, which moves both medians.
    paired = median(cpu[mode].zip(cpu["baseline"]).map { |c, b| c / b })
    # steady: the CPU of the work alone, between start and stop, paired
    # like the above; start+stop is the rest of the mode's CPU (one-time
    # costs a long-running process pays once: timers, threads, the first
    # flush's lazy requires), as the median of (cpu - work) over the runs.
    steady = median(work[mode].zip(work["baseline"]).map { |c, b| c / b })
    fixed_ms = median(cpu[mode].zip(work[mode]).map { |c, w| (c - w) * 1e3 })
    puts format("  %-19s median %7.3fs ratio %.3fx | cpu ratio %.3fx | paired cpu ratio %.3fx | min ratio %.3fx | " \
                "steady paired %.3fx, start+stop %5.1f ms | samples %6d  (runs: %s)",
                mode, m, m / base, median(cpu[mode]) / base_cpu, paired, cpu[mode].min / cpu["baseline"].min,
                steady, fixed_ms, median(samples[mode]), times[mode].map { |t| format("%.3f", t) }.join(" "))
  end
end
