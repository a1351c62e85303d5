# frozen_string_literal: true

# Serving profiles under load (not a test; prints figures).
#
#   ruby -Ilib bench/rack_load.rb [--seconds 20] [--connections 50]
#
# Starts puma with test/fixtures/rack_app (always-on heap profiling from
# fathom/setup, the /debug/fathom endpoints mounted) twice, each time under
# `wrk -c 50 -d 20s` on GET /churn from 127.0.0.1:
#   baseline  no profile fetches;
#   fetching  two fetchers asking in turn for heap, allocs, gc?seconds=2 and
#             retention?force=1 (so some requests collide: 429 by the rules).
# Reports wrk's failed requests (non-2xx, socket errors), the fetches by
# status (200 served, 429 refused by the one-at-a-time rule, anything else a
# failure), puma's RSS after each run (fetching vs baseline), and the p99
# latency of a probe (sequential GET / every 10 ms) while a heap fetch (or a
# retention fetch) is in flight vs the baseline's. With --pairs N the two runs
# alternate N times and each pair's RSS ratio is printed (one pair's ratio
# moves by several percent from chance alone: --paths "" measures that).
#
# --always-on-set: instead, what the whole always-on set costs in requests/s.
# Two pumas at once,
#   baseline   fathom/setup loaded but off (FATHOM_SETUP=0);
#   always-on  FATHOM_MODE=cpu,heap,gc pushed every 10 s to a loopback
#              receiver (a thread here that answers 200), request labels on;
# both pinned to CPU 1 and wrk to CPU 0 (taskset: this machine's two vCPUs
# run the same loop at different speeds), loaded in turn by 2 s bursts
# (8 x --pairs of them, at least 16), no fetches; prints the median ratio
# of adjacent bursts' requests/s.
require "etc"
require "net/http"
require "socket"
require "optparse"
require "tmpdir"

ROOT = File.expand_path("..", __dir__)
APP_DIR = File.join(ROOT, "test/fixtures/rack_app")
seconds = 20
connections = 50
PATHS = %w[heap allocs gc?seconds=2 retention?force=1] # rubocop:disable Style/MutableConstant -- --paths replaces it
MALLOC_STATS_DIR = +""
SETTLE = +""
PUMA_ENV = {} # rubocop:disable Style/MutableConstant -- --puma-env fills it
PIN = +"" # --pin
FETCH = { threads: 2, pause: 0.2 } # rubocop:disable Style/MutableConstant -- --fetchers, --fetch-pause
pairs = 1
ALWAYS_ON_SET = +""
OptionParser.new do |o|
  o.on("--always-on-set", "the always-on set's cost in requests/s (pairs against FATHOM_SETUP=0; see above)") { ALWAYS_ON_SET.replace("1") }
  o.on("--push-down", "with --always-on-set: push to a port nothing listens on (the backend is down)") { ALWAYS_ON_SET.replace("down") }
  o.on("--seconds N", Integer) { |v| seconds = v }
  o.on("--ballast N", Integer, "puma holds N more live strings (a bigger heap for /retention; both runs)") { |v| PUMA_ENV["FATHOM_BENCH_BALLAST"] = v.to_s }
  o.on("--fetchers N", Integer, "fetching threads (default 2)") { |v| FETCH[:threads] = v }
  o.on("--fetch-pause S", Float, "each fetcher's pause between fetches (default 0.2 s)") { |v| FETCH[:pause] = v }
  o.on("--pin", "puma on CPU 1, wrk on CPU 0 (a forked snapshot's child then shares puma's CPU)") { PIN.replace("1") }
  o.on("--connections N", Integer) { |v| connections = v }
  o.on("--malloc-stats DIR", "before stopping puma, save glibc's malloc_stats (gdb) and smaps there") { |v| MALLOC_STATS_DIR.replace(v) }
  o.on("--puma-env NAME=VALUE", "an environment variable for puma, both runs (e.g. MALLOC_ARENA_MAX=2)") do |v|
    PUMA_ENV.store(*v.split("=", 2))
  end
  o.on("--settle", "before reading RSS, in both runs: GET heap?gc=1 (GC.start + malloc_trim in puma)") { SETTLE.replace("1") }
  o.on("--pairs N", Integer, "baseline + fetching runs, alternating, N times (RSS varies by MBs run to run)") { |v| pairs = v }
  o.on("--paths LIST", "endpoints to fetch, comma-separated (default: #{PATHS.join(",")}; \"\" = none: the runs differ only by chance)") { |v| PATHS.replace(v.split(",")) }
end.parse!

abort "bench/rack_load.rb: needs puma and wrk (script/setup installs them)" unless system("which puma wrk > /dev/null")

def now = Process.clock_gettime(Process::CLOCK_MONOTONIC)

def start_puma(dir, extra_env = {}, pin: [])
  port = TCPServer.new("127.0.0.1", 0).then { |s| s.addr[1].tap { s.close } }
  env = { "RUBYOPT" => "-I#{ROOT}/lib -rfathom/setup", "BUNDLE_GEMFILE" => nil, "FATHOM_MODE" => "heap",
          "FATHOM_DIR" => dir, "FATHOM_EVERY" => "10s", "FATHOM_KEEP" => "10" }.merge(PUMA_ENV).merge(extra_env)
  pid = Process.spawn(env, *pin, "puma", "-b", "tcp://127.0.0.1:#{port}", "-t", "8:8", "config.ru",
                      chdir: APP_DIR, out: File::NULL, err: File.join(dir, "puma.log"))
  200.times do
    break if (Net::HTTP.get_response("127.0.0.1", "/", port).code == "200" rescue false)

    sleep 0.1
  end
  [pid, port]
end

# puma's CPU time so far (user + system, all its threads), from /proc.
def cpu_seconds(pid)
  fields = File.read("/proc/#{pid}/stat").split(") ", 2).last.split
  (fields[11].to_i + fields[12].to_i).fdiv(Etc.sysconf(Etc::SC_CLK_TCK))
end

def rss_kb(pid)
  File.read("/proc/#{pid}/status")[/VmRSS:\s+(\d+)/, 1].to_i
end

# Where puma's memory is, for diagnosis: glibc's per-arena totals
# (malloc_stats() called through gdb: in use vs held by each arena) and the
# mappings' RSS (/proc/PID/smaps).
# malloc_stats writes to puma's stderr, its log in `dir`.
def save_malloc_stats(pid, label, dir)
  FileUtils.mkdir_p(MALLOC_STATS_DIR)
  system("gdb", "-p", pid.to_s, "-batch", "-ex", "call (void)malloc_stats()", out: File::NULL, err: File::NULL)
  log = File.read(File.join(dir, "puma.log"))
  File.write(File.join(MALLOC_STATS_DIR, "#{label}.malloc_stats"), log[/^Arena 0:.*/m] || "no malloc_stats output\n")
  File.write(File.join(MALLOC_STATS_DIR, "#{label}.smaps"), File.read("/proc/#{pid}/smaps"))
  # glibc's current (dynamic) mmap threshold, probed: a block the main
  # thread mallocs below it comes from the brk heap, above it is mmapped.
  sizes = [128, 256, 512, 1024, 2048, 4096, 8192, 16_384].map { |k| k * 1024 }
  probe = IO.popen(["gdb", "-p", pid.to_s, "-batch", *sizes.flat_map { |n| ["-ex", "print (void*)malloc(#{n})"] }],
                   err: File::NULL, &:read)
  heap = File.read("/proc/#{pid}/maps")[/^(\h+)-(\h+) .*\[heap\]/] && ($1.hex..$2.hex)
  where = probe.scan(/= \(void \*\) (0x\h+)/).flatten.map(&:hex)
  File.write(File.join(MALLOC_STATS_DIR, "#{label}.mmap_threshold"),
             sizes.zip(where).map { |n, a| "#{n / 1024}K:#{a && heap&.cover?(a) ? "heap" : "mmap"}" }.join(" ") + "\n")
end

def percentile(values, p)
  return nil if values.empty?

  sorted = values.sort
  sorted[[(sorted.size * p).ceil - 1, 0].max]
end

# One run; returns its figures.
def run(label, seconds, connections, fetch:, env: {}, pin: false)
  dir = Dir.mktmpdir("fathom-rack-load")
  pid, port = start_puma(dir, env, pin: pin ? %w[taskset -c 1] : [])
  wrk_pin = pin ? %w[taskset -c 0] : []
  # Warm up (and let the heap settle) before measuring.
  system(*wrk_pin, "wrk", "-t2", "-c#{connections}", "-d3s", "http://127.0.0.1:#{port}/churn", out: File::NULL)
  stop_at = now + seconds
  heap_in_flight = 0
  retention_in_flight = 0
  lock = Mutex.new
  probe = { during_heap: [], during_retention: [], other: [] }
  prober = Thread.new do
    Net::HTTP.start("127.0.0.1", port) do |http|
      while now < stop_at
        t = now
        http.get("/")
        ms = (now - t) * 1000
        lock.synchronize do
          key = if heap_in_flight.positive? then :during_heap
                elsif retention_in_flight.positive? then :during_retention
                else :other
                end
          probe[key] << ms
        end
        sleep 0.01
      end
    end
  end
  statuses = Hash.new(0)
  heap_ms = []
  fetchers = fetch && !PATHS.empty? ? FETCH[:threads].times.map do |k|
    Thread.new do
      paths = PATHS.rotate(k * 2)
      i = 0
      while now < stop_at - 2
        path = paths[i % paths.size]
        i += 1
        heap = path.start_with?("heap")
        retention = path.start_with?("retention")
        lock.synchronize { heap_in_flight += 1 } if heap
        lock.synchronize { retention_in_flight += 1 } if retention
        t = now
        code = (Net::HTTP.start("127.0.0.1", port, read_timeout: 60) { |h| h.get("/debug/fathom/#{path}") }.code rescue "error")
        heap_ms << (now - t) * 1000 if heap && code == "200"
        lock.synchronize { heap_in_flight -= 1 } if heap
        lock.synchronize { retention_in_flight -= 1 } if retention
        lock.synchronize { statuses["#{path[/\A\w+/]} #{code}"] += 1 }
        sleep FETCH[:pause]
      end
    end
  end : []
  cpu_before = cpu_seconds(pid)
  wrk = IO.popen([*wrk_pin, "wrk", "-t2", "-c#{connections}", "-d#{seconds}s", "--latency", "http://127.0.0.1:#{port}/churn"], &:read)
  cpu_used = cpu_seconds(pid) - cpu_before
  [prober, *fetchers].each(&:join)
  sleep 1
  # --settle: what is left once garbage is collected and trimmed (in both
  # runs alike), to tell memory still in use from garbage not yet swept.
  Net::HTTP.get_response("127.0.0.1", "/debug/fathom/heap?gc=1", port) unless SETTLE.empty?
  rss = rss_kb(pid)
  stat = (Net::HTTP.get_response("127.0.0.1", "/stat", port).body rescue "no /stat")
  save_malloc_stats(pid, label, dir) unless MALLOC_STATS_DIR.empty?
  Process.kill("TERM", pid)
  Process.wait(pid)
  files = Dir.glob(File.join(dir, "*.pb.gz")).size
  temps = Dir.glob(File.join(dir, ".*fathom-tmp")).size
  FileUtils.rm_rf(dir)
  requests = wrk[/(\d+) requests in/, 1].to_i
  non2xx = wrk[/Non-2xx or 3xx responses: (\d+)/, 1].to_i
  socket = wrk[/Socket errors: (.*)/, 1]
  { label: label, requests: requests, cpu_per_request_us: cpu_used * 1e6 / [requests, 1].max, rps: wrk[/Requests\/sec:\s+([\d.]+)/, 1].to_f, non2xx: non2xx,
    socket_errors: socket || "none", wrk_p99: wrk[/^\s*99%\s+(\S+)/, 1], rss_kb: rss, statuses: statuses,
    probe_p99_heap: percentile(probe[:during_heap], 0.99), probe_p99_other: percentile(probe[:other], 0.99),
    probe_n_heap: probe[:during_heap].size, probe_p99_retention: percentile(probe[:during_retention], 0.99),
    probe_n_retention: probe[:during_retention].size, heap_fetch_ms: percentile(heap_ms, 0.5), files: files, temps: temps,
    stat: stat }
end

# A loopback stand-in for Pyroscope: reads each request and answers 200.
def start_receiver
  server = TCPServer.new("127.0.0.1", 0)
  received = [0]
  Thread.new do
    loop do
      client = server.accept
      length = 0
      while (line = client.gets) && line != "\r\n"
        length = line.split(":", 2).last.to_i if line.downcase.start_with?("content-length:")
      end
      client.read(length)
      received[0] += 1
      client.write("HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\n{}")
      client.close
    rescue IOError, SystemCallError
      nil
    end
  end
  ["pyroscope://127.0.0.1:#{server.addr[1]}", received]
end

unless ALWAYS_ON_SET.empty?
  url, received = start_receiver
  if ALWAYS_ON_SET == "down"
    url = "pyroscope://127.0.0.1:#{TCPServer.open("127.0.0.1", 0) { |s| s.addr[1] }}"
    received = ["none (backend down)"]
  end
  set_env = { "FATHOM_MODE" => "cpu,heap,gc", "FATHOM_DIR" => nil, "FATHOM_PUSH" => url, "FATHOM_EVERY" => "10s",
              "FATHOM_ENDPOINT_LABELS" => "1" }
  puts "wrk -c #{connections} -d #{seconds}s on GET /churn (pinned to CPU 0), puma 8 threads (pinned to CPU 1), Ruby #{RUBY_VERSION}"
  puts "always-on: #{set_env.compact.map { |k, v| "#{k}=#{v}" }.join(" ")}; baseline: FATHOM_SETUP=0"
  # Both servers run at once, pinned to the same CPU, and take the load in
  # turn in short bursts (order alternating): this machine's vCPU speed
  # drifts by 20% over tens of seconds, which separate runs of a whole
  # configuration each would measure as cost; adjacent bursts share it.
  dirs = 2.times.map { Dir.mktmpdir("fathom-rack-load") }
  servers = { baseline: start_puma(dirs[0], { "FATHOM_SETUP" => "0" }, pin: %w[taskset -c 1]),
              always_on: start_puma(dirs[1], set_env, pin: %w[taskset -c 1]) }
  burst = ->(port, secs) do
    out = IO.popen(["taskset", "-c", "0", "wrk", "-t2", "-c#{connections}", "-d#{secs}s", "http://127.0.0.1:#{port}/churn"], &:read)
    [out[%r{Requests/sec:\s+([\d.]+)}, 1].to_f, out[/Non-2xx or 3xx responses: (\d+)/, 1].to_i]
  end
  servers.each_value { |(_, port)| burst.call(port, 3) } # warm up
  bursts = [pairs, 2].max * 8
  ratios = bursts.times.map do |i|
    order = i.even? ? %i[baseline always_on] : %i[always_on baseline]
    got = order.to_h { |which| [which, burst.call(servers[which][1], 2)] }
    bad = got.values.sum(&:last)
    warn "burst #{i + 1}: #{bad} non-2xx responses" if bad.positive?
    got[:baseline][0] / got[:always_on][0]
  end
  rss = servers.transform_values { |(pid, _)| rss_kb(pid) / 1024 }
  servers.each_value do |(pid, _)|
    Process.kill("TERM", pid)
    Process.wait(pid)
  end
  dirs.each { |d| FileUtils.rm_rf(d) }
  sorted = ratios.sort
  puts format("always-on set cost in requests/s (baseline/always-on), %d alternating 2 s bursts: median %.3fx " \
              "(quartiles %.3f-%.3f); RSS after: baseline %d MB, always-on %d MB; %s profiles pushed",
              ratios.size, sorted[ratios.size / 2], sorted[ratios.size / 4], sorted[ratios.size * 3 / 4],
              rss[:baseline], rss[:always_on], received[0])
  exit
end

puts "wrk -c #{connections} -d #{seconds}s on GET /churn, puma 8 threads, always-on heap profiling, Ruby #{RUBY_VERSION}"
ratios = pairs.times.map do |pair|
  puts "-- pair #{pair + 1} of #{pairs}" if pairs > 1
  base = run("baseline", seconds, connections, fetch: false, pin: !PIN.empty?)
  fetching = run("fetching", seconds, connections, fetch: true, pin: !PIN.empty?)
  [base, fetching].each do |r|
    puts format("%-9s %7d requests (%6.0f/s), non-2xx %d, socket errors %s, wrk p99 %s, RSS after %d MB, files %d, temp files left %d",
                r[:label], r[:requests], r[:rps], r[:non2xx], r[:socket_errors], r[:wrk_p99], r[:rss_kb] / 1024, r[:files], r[:temps])
    puts "          #{r[:stat]}"
  end
  puts "fetches: #{fetching[:statuses].sort.map { |k, v| "#{k}: #{v}" }.join(", ")}"
  failed = fetching[:statuses].reject { |k, _| k.end_with?(" 200", " 429") }.values.sum
  puts "failed fetches (not 200, not 429 by the rules): #{failed}"
  ratio = fetching[:rss_kb].to_f / base[:rss_kb]
  puts format("RSS fetching / baseline: %.3f", ratio)
  puts format("probe p99 GET /: %.1f ms during heap fetches (%d probes; heap fetch median %.0f ms), %.1f ms otherwise, %.1f ms baseline",
              fetching[:probe_p99_heap] || Float::NAN, fetching[:probe_n_heap], fetching[:heap_fetch_ms] || Float::NAN,
              fetching[:probe_p99_other] || Float::NAN, base[:probe_p99_other] || Float::NAN)
  if fetching[:probe_n_retention].positive?
    puts format("probe p99 GET /: %.1f ms during retention fetches (%d probes), %.2fx the rest of the run",
                fetching[:probe_p99_retention], fetching[:probe_n_retention],
                fetching[:probe_p99_retention] / (fetching[:probe_p99_other] || Float::NAN))
  end
  ratio
end
puts format("RSS ratios: %s (median %.3f)", ratios.map { |r| format("%.3f", r) }.join(", "), ratios.sort[ratios.size / 2]) if pairs > 1
