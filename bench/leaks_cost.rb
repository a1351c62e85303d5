# frozen_string_literal: true

# The cost of FATHOM_LEAKS=1 on top of always-on heap profiling (issue 45):
# process CPU and peak RSS of the same app, with and without the leak
# monitor, in alternating runs (so that a machine that slows down mid-way
# slows both alike), medians and ratios.
#
#   ruby -Ilib bench/leaks_cost.rb [--rounds 5] [--windows 30] [--scenario steady] [--exact]
#   taskset -c 1 ruby -Ilib bench/leaks_cost.rb     # pinned, as in /work/logs
#
# The app is a leak verdict test app (test/fixtures/leaks/scenarios.rb):
# a window is a fixed count of work (churn plus what the scenario keeps),
# then a flush (PeriodicFlusher#flush_now); with FATHOM_LEAKS=1 the app
# also waits for the monitor to analyse the window (Monitor#settle), so its
# whole analysis is inside the measured CPU. Measured in the app at exit:
#
#   cpu     the app's own CPU (CLOCK_PROCESS_CPUTIME_ID): every thread, the
#           monitor's "fathom-leaks" thread included
#   child   CPU of its reaped children: the forked holder snapshot
#   hwm     peak RSS (VmHWM)
#
# Default mode (sampled) unless --exact: what production runs.
require "optparse"
require "open3"
require "tmpdir"
require "rbconfig"
require "json"

ROOT = File.expand_path("..", __dir__)
opts = { rounds: 5, windows: 30, scenario: "steady", exact: false }
OptionParser.new do |o|
  o.on("--rounds N", Integer) { |v| opts[:rounds] = v }
  o.on("--windows N", Integer) { |v| opts[:windows] = v }
  o.on("--scenario NAME") { |v| opts[:scenario] = v }
  o.on("--exact") { opts[:exact] = true }
end.parse!

REPORTER = <<~RUBY
  at_exit do
    hwm = File.read("/proc/self/status")[/^VmHWM:\\s+(\\d+)/, 1].to_i * 1024
    t = Process.times
    $stderr.puts "LEAKS_COST " + JSON.generate("cpu" => Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID),
                                               "child" => t.cutime + t.cstime, "hwm" => hwm)
  end
RUBY

def run(opts, leaks)
  Dir.mktmpdir("fathom-leaks-cost") do |dir|
    reporter = File.join(dir, "reporter.rb")
    File.write(reporter, "require 'json'\n#{REPORTER}")
    env = { "FATHOM_DIR" => File.join(dir, "out"), "FATHOM_MODE" => "heap", "FATHOM_EVERY" => "1h",
            "FATHOM_LEAKS" => leaks ? "1" : nil, "LEAK_WINDOWS" => opts[:windows].to_s,
            "FATHOM_EXACT" => opts[:exact] ? "1" : nil, "RUBYOPT" => nil }
    out, status = Open3.capture2e(env, RbConfig.ruby, "-I#{ROOT}/lib", "-rfathom/setup", "-r#{reporter}",
                                  File.join(ROOT, "test/fixtures/leaks/scenarios.rb"), opts[:scenario])
    line = out[/^LEAKS_COST (.*)$/, 1]
    abort "run failed (#{status}):\n#{out}" unless status.success? && line
    JSON.parse(line)
  end
end

def median(values)
  s = values.sort
  s.size.odd? ? s[s.size / 2] : (s[s.size / 2 - 1] + s[s.size / 2]) / 2.0
end

results = { false => [], true => [] }
opts[:rounds].times do |i|
  order = i.even? ? [false, true] : [true, false]
  order.each { |leaks| results[leaks] << run(opts, leaks) }
  warn "round #{i + 1}/#{opts[:rounds]} done"
end

puts "fathom bench/leaks_cost.rb: Ruby #{RUBY_VERSION}, scenario #{opts[:scenario]}, #{opts[:windows]} windows, " \
     "#{opts[:exact] ? "exact" : "sampled"} heap, #{opts[:rounds]} alternating rounds"
puts format("%-28s %10s %10s %10s", "", "CPU s", "child s", "peak RSS")
results.each do |leaks, runs|
  name = leaks ? "heap + FATHOM_LEAKS=1" : "always-on heap"
  puts format("%-28s %10.3f %10.3f %9.1fM   (CPU runs: %s)", name, median(runs.map { |r| r["cpu"] }),
              median(runs.map { |r| r["child"] }), median(runs.map { |r| r["hwm"] }) / 1048576.0,
              runs.map { |r| format("%.2f", r["cpu"]) }.join(" "))
end
base = results[false]
with = results[true]
cpu = median(with.map { |r| r["cpu"] }) / median(base.map { |r| r["cpu"] })
rss = median(with.map { |r| r["hwm"] }) - median(base.map { |r| r["hwm"] })
per_window = (median(with.map { |r| r["cpu"] }) - median(base.map { |r| r["cpu"] })) / opts[:windows] * 1000
puts format("FATHOM_LEAKS=1: process CPU %.2fx (%+.1f ms a window), peak RSS %+.1f MB; holder snapshot child CPU %.2f s",
            cpu, per_window, rss / 1048576.0, median(with.map { |r| r["child"] }))
