# frozen_string_literal: true

# Fathom's leak verdicts (FATHOM_LEAKS=1) side by side with two leak
# finders from RubyGems, socketry's memory-profiler (Memory::Profiler, Ruby
# 3.3+) and heapscope, on the leak verdicts' test apps
# (test/fixtures/leaks/scenarios.rb, seven apps of known truth; issue 45).
# Not a test: it prints, per tool and app, when the tool first named the
# right leak, what it named that was no leak, and what a verdict names.
#
#   R=$(script/ruby-bin 3.3)
#   GEM_HOME=/work/peer-gems/3.3 $R/gem install memory-profiler console heapscope   # once
#   nice -n 10 $R/ruby -Ilib bench/leaks_peers.rb [--tools fathom,fathom-exact,memory-profiler,heapscope]
#       [--scenarios steady,plateau,...] [--windows 30] [--scale 1] [--gem-home DIR] [--details]
#
# The peers are never in the project's Gemfile: they live in a private
# GEM_HOME (--gem-home, default /work/peer-gems/<major.minor of the Ruby
# running the bench>), which the bench sets as GEM_HOME and GEM_PATH of the
# peers' runs only. A peer whose gem does not load there is skipped with
# the reason. memory-profiler needs Ruby 3.3 (on 3.1 `gem install
# memory-profiler` resolves to 1.0.3, Matthew Kerwin's 2014 gem of the same
# name, another tool); its 1.6.3 gem declares no dependencies but requires
# `console`, hence `console` in the install line.
#
# Every run is the same app in a process of its own, LEAK_WINDOWS windows
# of LEAK_SCALE (default 1: the apps' own sizes, those of the exact test
# runs), one run at a time. A window is a count of work; after it the
# scenario calls LeakPeer.after_window(k) of the tool's adapter
# (bench/support/leaks_peer_*.rb, loaded with -r), which asks the tool what
# it would report now and prints it as one LEAKPEER line. How each was asked:
#
#   fathom           always-on heap + FATHOM_LEAKS=1, sampled as the test's
#                    sampled runs (FATHOM_INTERVAL=1ms); its verdicts are the
#                    monitor's "fathom: LEAK" and "fathom: GROWTH OUTSIDE RUBY"
#                    lines, said while the app waits for the window's analysis
#   fathom-exact     the same with FATHOM_EXACT=1 LEAK_GC=1 (the test's exact runs)
#   memory-profiler  Sampler.new(depth: 10, increases_threshold: 10), start,
#                    sample! after each window (its guides call it every 60 s);
#                    a class with 10 "increases" (live count over its highest
#                    so far by > 1,000 objects) is what the guides report as a
#                    leak, with sampler.statistics' top allocation path
#   heapscope        HeapScope.retention_test's session (force_gc: true,
#                    mode: :lightweight), sampled and finished after each
#                    window; a leak is an HS001 persistent_class_growth or
#                    HS004 unbounded_collection finding at medium or high
#                    severity (it names a class), HS010
#                    native_memory_mismatch (medium or high) is growth
#                    outside Ruby objects
#
# Measured: the window of the first correct verdict (the right site for
# Fathom, the right class for the peers, who name no site; for `double`
# both leaks, the first one's window in brackets), the wall seconds from
# the process's start to the end of that window and the process's CPU by
# then; false verdicts: every distinct name (site or class) said to leak
# that is not the app's leak, over the whole run (in plateau, lru and batch
# any leak at all; in native any Ruby site or class: its truth is growth
# outside Ruby objects); what the verdict names; the run's wall time and
# CPU (user + system of the reaped child, Fathom's forked holder snapshot
# included).
#
# Caveats, honestly:
# - The peers name a class, never a site or a holder: "String" is right for
#   steady and slow but says nothing of which Strings. A class verdict is
#   counted correct when it is the leak's class even if the class is
#   named for churn too. memory-profiler's guides promise a top allocation
#   path (a site) once a class has its 10 increases, but in 1.6.3 it never
#   comes: Sampler#sample! starts the call tree only `unless tracking?(klass)`,
#   and with track_all (the default) every class is already tracked, so
#   statistics/analyze has no allocation_roots. heapscope lists globals and CACHE/STORE/REGISTRY constants with their
#   sizes (shown in --details), not tied to any finding.
# - Neither peer gives a confidence figure: heapscope gives a severity
#   (low/medium/high), memory-profiler a count of increases.
# - heapscope's retention session keeps every sample it took (a Hash per
#   class per sample), and counts them: HeapScope.retention_test(cycles: 10)
#   { 1000.times { |i| i.to_s } }, which keeps nothing, reports Hash (high),
#   Array, Proc, String and Time as persistent growth. Its false verdicts
#   in the flat apps are mostly those.
# - memory-profiler counts live objects from NEWOBJ/FREEOBJ without a GC
#   before a sample (its default, gc: nil): garbage not yet swept counts as
#   live, so its increases follow GC timing as well as retention. It needs
#   10 increases, hence 11 samples at the least, whatever the leak's size:
#   with one sample a window it cannot answer before window 11 (with its
#   default 60 s interval, not before 10 minutes).
# - Fathom runs sampled (as production would) and, as fathom-exact, with
#   every allocation recorded and a GC before each flush; the peers count
#   every object. The sampled Fathom needs its leak to be material in
#   samples: the test's sampled steady run leaks 20x (LEAK_SCALE=20); here
#   every tool runs the same app (--scale).
# - Fathom exact names the holder's own buffer too when it grows enough:
#   at --scale 20, double's `$registry = []` line (60,000 entries) is a
#   leak site, counted here as a false verdict (it is no marked site).
#   Fathom's GROWTH OUTSIDE RUBY line in the exact steady and double runs
#   (RSS grew more than Ruby objects) is counted as a false verdict too.
# - Wall and CPU are of the whole run, the asking included: Fathom's
#   monitor analyses every window, and the adapters ask every window too
#   (heapscope's finish walks globals each time).
require "optparse"
require "open3"
require "rbconfig"
require "json"
require "tmpdir"
require "fileutils"

ROOT = File.expand_path("..", __dir__)
FIXTURE = File.join(ROOT, "test/fixtures/leaks/scenarios.rb")
SUPPORT = File.join(ROOT, "bench/support")
require File.join(ROOT, "test/support/native_leak")

MAJOR_MINOR = RUBY_VERSION[/\A\d+\.\d+/]
opts = { tools: %w[fathom fathom-exact memory-profiler heapscope],
         scenarios: %w[steady plateau lru batch double slow native], windows: 30, scale: 1,
         gem_home: ENV.fetch("LEAKS_PEERS_GEM_HOME", "/work/peer-gems/#{MAJOR_MINOR}"), details: false }
OptionParser.new do |o|
  o.on("--tools LIST", Array, "fathom,fathom-exact,memory-profiler,heapscope") { |v| opts[:tools] = v }
  o.on("--scenarios LIST", Array) { |v| opts[:scenarios] = v }
  o.on("--windows N", Integer) { |v| opts[:windows] = v }
  o.on("--scale N", Integer, "LEAK_SCALE for every run (default 1)") { |v| opts[:scale] = v }
  o.on("--gem-home DIR", "the peers' private GEM_HOME") { |v| opts[:gem_home] = v }
  o.on("--details", "print every run's verdicts at its last window") { opts[:details] = true }
end.parse!

PLAIN = { "RUBYOPT" => nil, "BUNDLE_GEMFILE" => nil, "BUNDLE_BIN_PATH" => nil, "BUNDLER_SETUP" => nil }.freeze

# The line of the fixture marked "site: NAME", as Fathom labels a site.
def site_line(name)
  @lines ||= File.readlines(FIXTURE)
  index = @lines.index { |l| l.include?("site: #{name}") } or abort("no site: #{name} in #{FIXTURE}")
  "test/fixtures/leaks/scenarios.rb:#{index + 1}"
end

# Each app's truth: its leaks, each with its site, the classes that name it
# (the registry's records are a Struct holding an Array of 50: either names
# it) and its holder; native's is growth outside Ruby objects.
Leak = Struct.new(:site, :classes, :holder)
TRUTH = {
  "steady" => [Leak.new(site_line("steady"), %w[String], "Steady::CACHE")],
  "plateau" => [], "lru" => [], "batch" => [],
  "double" => [Leak.new(site_line("double-sessions"), %w[String], "Sessions::STORE"),
               Leak.new(site_line("double-registry"), %w[Array Sessions::Record], "$registry")],
  "slow" => [Leak.new(site_line("slow"), %w[String], "Slow::GROWING")],
  "native" => :native
}.freeze

PEER_GEMS = { "memory-profiler" => "memory/profiler", "heapscope" => "heapscope" }.freeze

def peer_env(opts)
  PLAIN.merge("GEM_HOME" => opts[:gem_home], "GEM_PATH" => opts[:gem_home])
end

# nil when the peer loads from its GEM_HOME, else why not.
def peer_missing(tool, opts)
  return nil unless (feature = PEER_GEMS[tool])
  if tool == "memory-profiler" && Gem::Version.new(RUBY_VERSION) < Gem::Version.new("3.3")
    # `gem install memory-profiler` on 3.1 installs 1.0.3, Matthew Kerwin's
    # 2014 gem of the same name (MemoryProfiler, another tool).
    return "socketry's memory-profiler requires Ruby >= 3.3 (this is #{RUBY_VERSION})"
  end
  return "no GEM_HOME #{opts[:gem_home]}" unless File.directory?(opts[:gem_home])

  out, status = Open3.capture2e(peer_env(opts), RbConfig.ruby, "-e", "require #{feature.dump}")
  status.success? ? nil : "does not load on Ruby #{RUBY_VERSION} from #{opts[:gem_home]}: #{out.lines.first&.strip}"
end

def command(tool, scenario, opts, dir)
  ext = scenario == "native" ? ["-I#{NativeLeak.load_path}"] : []
  base = { "LEAK_WINDOWS" => opts[:windows].to_s, "LEAK_SCALE" => opts[:scale].to_s }
  case tool
  when "fathom", "fathom-exact"
    env = PLAIN.merge(base).merge("FATHOM_DIR" => dir, "FATHOM_MODE" => "heap", "FATHOM_EVERY" => "1h",
                                  "FATHOM_LEAKS" => "1")
    env.merge!(tool == "fathom" ? { "FATHOM_INTERVAL" => "1ms" } : { "FATHOM_EXACT" => "1", "LEAK_GC" => "1" })
    [env, RbConfig.ruby, "-I#{ROOT}/lib", *ext, "-rfathom/setup", "-I#{SUPPORT}", "-rleaks_peer_fathom", FIXTURE, scenario]
  else
    adapter = "leaks_peer_#{tool.tr("-", "_")}"
    [peer_env(opts).merge(base), RbConfig.ruby, *ext, "-I#{SUPPORT}", "-r#{adapter}", FIXTURE, scenario]
  end
end

Verdict = Struct.new(:kind, :name, :klass, :holder, :confidence, :extra, keyword_init: true)
Window = Struct.new(:n, :wall, :cpu, :verdicts, :globals)
Run = Struct.new(:tool, :scenario, :windows, :wall, :cpu, :status, :log, :cmd)

# "fathom: LEAK  FILE:LINE (Class)  +rate, 99.99% confidence over N windows; held by X (96%); ..."
def fathom_verdict(line)
  if (m = line.match(/\Afathom: LEAK  (\S+) \(([^)]*)\)/))
    Verdict.new(kind: "leak", name: m[1], klass: m[2], holder: line[/held by (.+?) \(\d+%\)/, 1],
                confidence: line[/, (>?[\d.]+%) confidence/, 1])
  elsif line.start_with?("fathom: GROWTH OUTSIDE RUBY")
    Verdict.new(kind: "native", name: "growth outside Ruby objects")
  end
end

def peer_verdict(h)
  if h["kind"] == "native"
    Verdict.new(kind: "native", name: "#{h["code"]} native_memory_mismatch", extra: h["severity"])
  else
    extra = h["severity"] ? "#{h["code"]} #{h["severity"]}" : "#{h["increases"]} increases"
    extra += "; top path #{h["site"]}" if h["site"]
    Verdict.new(kind: "leak", name: h["class"], klass: h["class"], extra: extra)
  end
end

# Runs one app under one tool, reading its output as it comes.
def run(tool, scenario, opts)
  Dir.mktmpdir("fathom-leaks-peers") do |dir|
    env, *cmd = command(tool, scenario, opts, File.join(dir, "out"))
    windows = []
    pending = []
    log = +""
    before = Process.times
    start = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    status = Open3.popen2e(env, *cmd, chdir: ROOT) do |stdin, out, wait|
      stdin.close
      out.each_line do |line|
        log << line
        now = Process.clock_gettime(Process::CLOCK_MONOTONIC) - start
        if line.start_with?("LEAKPEER ")
          h = JSON.parse(line.delete_prefix("LEAKPEER "))
          verdicts = pending + h["verdicts"].map { |v| peer_verdict(v) }
          pending = []
          windows << Window.new(h["window"], now, h["cpu"], verdicts, h["globals"])
        elsif (v = fathom_verdict(line.chomp))
          pending << v
        end
      end
      wait.value
    end
    wall = Process.clock_gettime(Process::CLOCK_MONOTONIC) - start
    after = Process.times
    cpu = (after.cutime + after.cstime) - (before.cutime + before.cstime)
    Run.new(tool, scenario, windows, wall, cpu, status, log, [env.compact.map { |k, v| "#{k}=#{v}" }, *cmd].flatten.join(" "))
  end
end

# Fathom says a verdict once; a peer says its current ones every window:
# what Fathom said stays said.
def said_by(run, upto)
  sticky = run.tool.start_with?("fathom")
  ws = run.windows.select { |w| w.n <= upto }
  sticky ? ws.flat_map(&:verdicts) : Array(ws.last&.verdicts)
end

def names_leak?(verdict, leak, tool)
  return false unless verdict.kind == "leak"

  tool.start_with?("fathom") ? verdict.name == leak.site : leak.classes.include?(verdict.klass)
end

def correct?(verdict, truth, tool)
  return verdict.kind == "native" if truth == :native

  truth.any? { |leak| names_leak?(verdict, leak, tool) }
end

Result = Struct.new(:first, :all, :false_names, :named, :gone, keyword_init: true)

def judge(run)
  truth = TRUTH.fetch(run.scenario)
  first = all = nil
  run.windows.each do |w|
    said = said_by(run, w.n)
    hits = truth == :native ? said.count { |v| v.kind == "native" }.clamp(0, 1) : truth.count { |l| said.any? { |v| names_leak?(v, l, run.tool) } }
    first ||= w if hits.positive?
    all ||= w if hits == (truth == :native ? 1 : truth.size) && hits.positive?
  end
  false_names = run.windows.flat_map(&:verdicts).reject { |v| truth != [] && correct?(v, truth, run.tool) }.map(&:name).uniq
  last = said_by(run, Float::INFINITY)
  named = last.select { |v| truth != [] && correct?(v, truth, run.tool) }.uniq(&:name)
  gone = nil
  if named.empty? && first
    # A peer's verdict that came and went: what it named when right.
    named = said_by(run, (all || first).n).select { |v| correct?(v, truth, run.tool) }.uniq(&:name)
    gone = run.windows.last.n
  end
  Result.new(first: first, all: all, false_names: false_names, named: named, gone: gone)
end

def named_text(tool, named)
  return "-" if named.empty?

  named.map do |v|
    case v.kind
    when "native" then tool.start_with?("fathom") ? "growth outside Ruby" : v.name
    else
      if tool.start_with?("fathom")
        "site #{v.name.split(":").last} + #{v.klass} + holder #{v.holder || "?"} + #{v.confidence}"
      else
        "class #{v.klass} (#{v.extra})"
      end
    end
  end.join(" | ")
end

def window_text(result, truth)
  return "never" unless result.first

  w = truth.is_a?(Array) && truth.size > 1 ? result.all : result.first
  text = w ? format("%d (%.1fs, cpu %.2fs)", w.n, w.wall, w.cpu) : "never (all)"
  text += " [first: #{result.first.n}]" if truth.is_a?(Array) && truth.size > 1 && result.first != result.all
  text
end

runs = []
skipped = {}
cmds = []
opts[:tools].each do |tool|
  if (why = peer_missing(tool, opts))
    skipped[tool] = why
    warn "#{tool}: skipped: #{why}"
    next
  end
  opts[:scenarios].each do |scenario|
    warn "#{tool} #{scenario} ..."
    r = run(tool, scenario, opts)
    warn "  #{tool} #{scenario} failed (#{r.status}):\n#{r.log.lines.last(15).join}" unless r.status.success?
    cmds << r.cmd
    runs << r
  end
end

puts "fathom bench/leaks_peers.rb: #{RUBY_DESCRIPTION}"
puts "#{opts[:windows]} windows, LEAK_SCALE=#{opts[:scale]}, peers' GEM_HOME #{opts[:gem_home]}"
versions = PEER_GEMS.keys.filter_map do |g|
  spec = Dir[File.join(opts[:gem_home], "specifications", "#{g}-[0-9]*.gemspec")].max
  spec && File.basename(spec, ".gemspec")
end
puts "peers: #{versions.join(", ")}" unless versions.empty?
skipped.each { |tool, why| puts "#{tool}: skipped: #{why}" }
puts
puts format("%-16s %-8s %-30s %-40s %7s %7s  %s", "tool", "app", "first correct verdict: window", "false verdicts",
            "wall s", "CPU s", "what it names")
runs.each do |r|
  res = judge(r)
  truth = TRUTH.fetch(r.scenario)
  first = truth == [] ? "(no leak)" : window_text(res, truth)
  false_text = res.false_names.empty? ? "none" : "#{res.false_names.size}: #{res.false_names.first(4).join(", ")}#{res.false_names.size > 4 ? ", ..." : ""}"
  status = r.status.success? ? "" : " FAILED #{r.status.exitstatus}"
  named = named_text(r.tool, res.named)
  named += " (no longer said at window #{res.gone})" if res.gone
  puts format("%-16s %-8s %-30s %-40s %7.1f %7.2f  %s%s", r.tool, r.scenario, first, false_text, r.wall, r.cpu,
              named, status)
end

if opts[:details]
  puts
  runs.each do |r|
    last = r.windows.last
    puts "#{r.tool} #{r.scenario}: #{r.windows.size} windows"
    said_by(r, Float::INFINITY).uniq { |v| [v.kind, v.name] }.each do |v|
      puts "  #{v.kind} #{v.name} #{v.klass} #{v.holder} #{v.confidence} #{v.extra}".squeeze(" ")
    end
    puts "  globals: #{last.globals.join(", ")}" if last&.globals
    r.log.lines.grep(/^fathom: (LEAK|GROWTH)/).each { |l| puts "  #{l.strip}" }
  end
end

puts
puts "commands:"
cmds.each { |c| puts "  #{c}" }
