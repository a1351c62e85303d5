# frozen_string_literal: true

# Accuracy of the heap profiler's default (sampled) mode against a known
# truth. Not a test: each run is one fresh process running a ≥ 5 s workload
# under Fathom::HeapProfiler.new with no options (the default interval),
# then comparing, per allocation site, the profile's share of live bytes
# (inuse_space) and of allocated bytes (alloc_space) with the truth:
#
# - live bytes: ObjectSpace.memsize_of of every object the program kept,
#   after a full GC (the profile is flushed with gc: true likewise);
# - allocated bytes: the program's own counting (memsize_of of each object
#   right after allocating it, the size Fathom records at commit).
#
# Shares are among the workload's sites only (the profile also holds the
# runner's own allocations; they are left out of both sides). The workload
# mixes sizes (40 B to 10 KB) and lifetimes (none to 10% kept), so a
# sampler that favours small short-lived objects shows here. The "report"
# column says what `fathom report` shows of each site's live bytes: "few"
# (marked ?, under 10 samples), "in" / "OUT" (the true live bytes inside /
# outside the report's 95% interval). Each run's line also gives the
# sampler's candidates, how many it kept after thinning by bytes, and the
# thinning threshold it settled on (docs/internals/heap.md "Thinning by bytes").
#
#   ruby -Ilib bench/accuracy.rb [--runs 10] [--seconds 5.5] [--verbose]
#                                [--interval 10ms]   (default: the profiler's)
#                                [--census on|off] [--shared] [--beside]
require "optparse"
require "rbconfig"
require_relative "../lib/fathom/report/sample_interval"

# name => [kind, size, allocations per cycle, keep 1 in N (0 = never)].
# Sizes are element counts for arrays (8 bytes each) and bytes for strings.
# Each of these sites is alone in its class and size class, so
# the heap census (docs/internals/heap.md, "Calibrating live bytes to a heap
# census") knows each one's live bytes exactly once it has one live sample;
# --shared adds SHARED_SITES, which share the classes of the two rare big
# survivors, so that the sample must split a class's census between sites.
BASE_SITES = {
  "site_str_40" => [:str, 20, 8, 0],        # embedded String (40 B slot), never kept
  "site_str_200" => [:str, 200, 4, 10],     # 10% kept
  "site_str_1k" => [:str, 1000, 2, 40],     # 2.5% kept
  "site_str_10k" => [:str, 10_000, 1, 200], # 0.5% kept, rare and big
  "site_ary_40" => [:ary, 1, 6, 20],        # embedded Array, 5% kept
  "site_ary_800" => [:ary, 100, 2, 0],      # never kept
  "site_ary_8k" => [:ary, 1000, 1, 100],    # 1% kept
}.freeze
SHARED_SITES = {
  "site_str_9k" => [:str, 9_000, 1, 100], # 1% kept, same class (8-10 KB) as site_str_10k
  "site_ary_7k" => [:ary, 950, 1, 50],    # 2% kept, same class (7-8 KB) as site_ary_8k
}.freeze
SITES = ARGV.include?("--shared") ? BASE_SITES.merge(SHARED_SITES) : BASE_SITES

# One method per site, so that the site is the innermost Ruby frame of the
# sample's stack. Each allocates exactly one object.
module Sites
  # A frozen literal: `"x" * n` would allocate the literal too, a second
  # object on the site's stack that the truth (one object per call) misses;
  # for site_str_40 that doubled the estimate of its allocated bytes.
  X = "x".freeze
  # def, not define_method: a block would be named "block in <module:Sites>".
  SITES.each do |name, (kind, size, _, _)|
    body = kind == :str ? "X * #{size}" : "Array.new(#{size})"
    module_eval("def self.#{name} = #{body}", __FILE__, __LINE__)
  end
end

def child(seconds, interval, census)
  $LOAD_PATH.unshift(File.expand_path("../lib", __dir__))
  require "fathom"
  require "objspace"

  names = SITES.keys
  per_cycle = SITES.values.map { |v| v[2] }
  keep_every = SITES.values.map { |v| v[3] }
  kept = names.map { [] }
  counters = names.map { 0 }
  alloc_bytes = names.map { 0 }
  alloc_count = names.map { 0 }

  GC.start
  opts = {}
  opts[:interval] = interval if interval
  opts[:census] = false unless census
  profiler = Fathom::HeapProfiler.new(**opts)
  profiler.start
  deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + seconds
  while Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
    200.times do
      i = 0
      while i < names.size
        n = per_cycle[i]
        while n > 0
          obj = Sites.__send__(names[i])
          alloc_bytes[i] += ObjectSpace.memsize_of(obj)
          alloc_count[i] += 1
          k = keep_every[i]
          if k > 0
            counters[i] += 1
            if counters[i] == k
              counters[i] = 0
              kept[i] << obj
            end
          end
          n -= 1
        end
        i += 1
      end
    end
  end
  sampler = profiler.stats # candidates looked at, thinned, the thinning threshold
  profiler.stop
  # --beside: another thread allocates (small arrays, every ms) during the
  # flush, so the census walks in slices and yields to it between them
  # (docs/internals/heap.md, "A census in slices"); alone it is one slice.
  stop_beside = false
  beside = if ARGV.include?("--beside")
             Thread.new do
               until stop_beside
                 Array.new(100) { "y" * 10 }
                 sleep Float(ENV.fetch("FATHOM_ACCURACY_BESIDE_SLEEP", "0.001"))
               end
             end
           end
  profile = profiler.flush(gc: true)
  stop_beside = true
  beside&.join
  live_bytes = kept.map { |objs| objs.sum { |o| ObjectSpace.memsize_of(o) } }

  decoded = profile.decode
  ai = decoded.sample_type_index("alloc_space")
  ii = decoded.sample_type_index("inuse_space")
  si = decoded.sample_type_index("inuse_samples")
  asi = decoded.sample_type_index("alloc_samples")
  est_alloc = Hash.new(0)
  est_live = Hash.new(0)
  live_samples = Hash.new(0)
  alloc_samples = Hash.new(0)
  decoded.samples.each do |s|
    site = decoded.stack_names(s).find { |n| n.include?("site_") }
    next unless site

    site = site[/site_\w+/]
    est_alloc[site] += s.values[ai]
    est_live[site] += s.values[ii]
    live_samples[site] += s.values[si] if si
    alloc_samples[site] += s.values[asi] if asi
  end
  names.each_with_index do |name, i|
    puts [name, alloc_bytes[i], live_bytes[i], est_alloc[name], est_live[name], alloc_count[i],
          alloc_samples[name], live_samples[name]].join(" ")
  end
  puts "stats #{sampler[:samples_taken].to_i} #{sampler[:samples_thinned].to_i} #{sampler[:thin_threshold].to_i} " \
       "#{profile.stats[:census_ns].to_i} #{profile.stats[:census]}" \
       "#{" (#{profile.stats[:dead_by_census]} dead by census, #{profile.stats[:census_rushed].to_i == 1 ? "rushed, " : ""}" \
          "#{profile.stats[:census_calibrated_strata]} calibrated strata)" if ENV["FATHOM_ACCURACY_DEBUG"]}" \
       "#{" (#{profile.stats[:census_slices]} slices)" if profile.stats[:census_slices].to_i > 1}"
  keep = kept # the kept objects must stay reachable until here
  keep.size
end

if ARGV[0] == "--child"
  child(Float(ARGV[1]), ARGV[2] == "-" ? nil : ARGV[2], ARGV[3] == "on")
  exit
end

runs = 10
seconds = 5.5
interval = nil
verbose = false
census = "on"
shared = false
beside = false
OptionParser.new do |o|
  o.on("--runs N", Integer) { |n| runs = n }
  o.on("--seconds S", Float) { |s| seconds = s }
  o.on("--interval I", String) { |i| interval = i }
  o.on("--verbose") { verbose = true }
  o.on("--census on|off", %w[on off], "calibrate live bytes to a heap census (default: on, the profiler's default)") { |c| census = c }
  o.on("--shared", "add sites that share the big survivors' size classes") { shared = true }
  o.on("--beside", "a thread allocates beside the flush (the census walks in slices)") { beside = true }
end.parse!
abort "--seconds must be at least 5" if seconds < 5

def shares(values)
  total = values.sum.to_f
  values.map { |v| total.zero? ? 0.0 : 100.0 * v / total }
end

puts "Fathom heap accuracy (Ruby #{RUBY_VERSION}, #{runs} runs of #{seconds}s, " \
     "interval #{interval || "default"}, census #{census}#{", shared size classes" if shared}" \
     "#{", a thread allocating beside the flush" if beside}, fresh process per run)"
puts "shares are % of the sites' total; error = |estimate - truth| in percentage points"
worst = []
# What `fathom report` would say of each site's live share: marked as
# resting on too few samples, or an interval that holds the truth or not.
verdicts = Hash.new(0)
runs.times do |r|
  out = IO.popen([RbConfig.ruby, __FILE__, "--child", seconds.to_s, interval || "-", census, *("--shared" if shared),
                  *("--beside" if beside)],
                 &:read)
  raise "run #{r + 1} failed" unless $?.success?

  rows = out.lines.grep(/\Asite_/).map(&:split)
  candidates, thinned, threshold, census_ns, census_state = out[/^stats (.*)$/, 1].split(" ", 5)
  candidates, thinned, threshold, census_ns = [candidates, thinned, threshold, census_ns].map(&:to_i)
  names = rows.map(&:first)
  alloc_t, live_t, alloc_e, live_e, counts, asamples, lsamples = (1..7).map { |c| rows.map { |row| Integer(row[c]) } }
  at, lt, ae, le = [alloc_t, live_t, alloc_e, live_e].map { |v| shares(v) }
  alloc_err = names.each_index.map { |i| (ae[i] - at[i]).abs }
  live_err = names.each_index.map { |i| (le[i] - lt[i]).abs }
  worst << [alloc_err.max, live_err.max]
  verdict = names.each_index.map do |i|
    next "-" if live_e[i].zero? && lt[i].zero?

    n = lsamples[i]
    if Fathom::Report::SampleInterval.few?(n)
      "few"
    else
      # The report's interval is on the site's live bytes (not on its
      # share, whose denominator carries every other site's error too).
      low, high = Fathom::Report::SampleInterval.factors(n)
      live_e[i] * low <= live_t[i] && live_t[i] <= live_e[i] * high ? "in" : "OUT"
    end
  end
  verdict.each { |v| verdicts[v] += 1 unless v == "-" }
  if verbose || r.zero?
    puts
    puts "run #{r + 1}: #{counts.sum} allocations by the sites"
    puts format("  %-14s %8s %8s %6s %8s %8s %6s %7s %7s  %s", "site", "alloc%", "true%", "err", "live%", "true%", "err",
                "a.smpl", "l.smpl", "report")
    names.each_index do |i|
      puts format("  %-14s %8.2f %8.2f %6.2f %8.2f %8.2f %6.2f %7d %7d  %s", names[i], ae[i], at[i], alloc_err[i],
                  le[i], lt[i], live_err[i], asamples[i], lsamples[i], verdict[i])
    end
  end
  puts format("run %2d: worst error alloc %5.2f pp, live %5.2f pp  (%d candidates, %d kept, threshold %d B, census %s%s)",
              r + 1, alloc_err.max, live_err.max, candidates, candidates - thinned, threshold, census_state,
              census_state.start_with?("on") ? format(" %.1f ms", census_ns / 1e6) : "")
end
within = worst.count { |a, l| a <= 3.0 && l <= 3.0 }
puts
puts "runs with every share within 3 pp: #{within}/#{runs}"
puts "live shares as fathom report shows them: #{verdicts["few"]} marked as resting on too few samples, " \
     "#{verdicts["in"]} with the truth inside the interval, #{verdicts["OUT"]} outside it"
puts format("median worst error: alloc %.2f pp, live %.2f pp",
            worst.map(&:first).sort[runs / 2], worst.map(&:last).sort[runs / 2])
