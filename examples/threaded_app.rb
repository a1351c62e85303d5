# frozen_string_literal: true

# A small threaded "app" for the combined Firefox Profiler example
# (examples/cpu_gc_heap.json.gz, made by script/make-firefox-example) and its
# end-to-end test (test/integration/firefox_combined_test.rb):
#   - two "web-1"/"web-2" threads render pages (allocation-heavy: strings,
#     arrays) and keep sessions: the heap allocations and the GCs;
#   - a "compressor" thread deflates a large buffer with Zlib (CPU in libz,
#     seen as C frames with --native);
#   - a "sleeper" thread sleeps (wall time, no CPU);
#   - the main thread warms the renderer (~50 ms of its own CPU), then
#     waits for them.
# Profile it with:
#   ruby -Ilib exe/fathom run --mode cpu,gc,heap --format firefox --native -o app.json.gz -- ruby examples/threaded_app.rb
# THREADED_APP_SECONDS sets how long the threads work (default 1.0);
# THREADED_APP_TRUTH, a path, gets each thread's own CPU time (JSON).
require "json"
require "zlib"

SECONDS = Float(ENV.fetch("THREADED_APP_SECONDS", "1.0"))
CPU = Process::CLOCK_THREAD_CPUTIME_ID
MONO = Process::CLOCK_MONOTONIC

class PageRenderer
  def render(request_id)
    rows = Array.new(20) { |i| "<tr><td>#{request_id}</td><td>#{i}</td></tr>" }
    "<table>#{rows.join}</table>".upcase
  end
end

module SessionStore
  SESSIONS = {}
  LOCK = Mutex.new

  def self.remember(id)
    LOCK.synchronize { SESSIONS[id] = "session-#{id}-" * 20 }
  end
end

def serve(requests_until)
  renderer = PageRenderer.new
  n = 0
  while Process.clock_gettime(MONO) < requests_until
    renderer.render(n)
    SessionStore.remember("#{Thread.current.name}-#{n}")
    n += 1
  end
  n
end

def compress(until_time)
  data = Random.new(42).bytes(256 * 1024) * 8 # 2 MiB, half random: libz works for it
  rounds = 0
  while Process.clock_gettime(MONO) < until_time
    Zlib::Deflate.deflate(data)
    rounds += 1
  end
  rounds
end

# The main thread's own work, before it starts the others: one unbroken
# stretch of ~50 ms of CPU. A CPU profile's timer fires every ~10 ms of a
# thread's CPU clock, so main is always sampled (its track is always in a
# Firefox file), not only when the final GC.start happens to cross a tick.
warm_until = Process.clock_gettime(CPU) + 0.05
warm = PageRenderer.new
warm.render(-1) while Process.clock_gettime(CPU) < warm_until

truth = {}
lock = Mutex.new
deadline = Process.clock_gettime(MONO) + SECONDS
work = {
  "web-1" => -> { serve(deadline) },
  "web-2" => -> { serve(deadline) },
  "compressor" => -> { compress(deadline) },
  "sleeper" => -> { sleep(SECONDS) },
}
threads = work.map do |name, job|
  Thread.new do
    Thread.current.name = name
    cpu0 = Process.clock_gettime(CPU)
    job.call
    lock.synchronize { truth[name] = { "cpu" => Process.clock_gettime(CPU) - cpu0, "tid" => Thread.current.native_thread_id } }
  end
end
threads.each(&:join)
GC.start # one major GC for the GC track, whatever the allocation rate
path = ENV["THREADED_APP_TRUTH"]
File.write(path, JSON.generate(truth)) if path && !path.empty?
warn "threaded_app: #{SessionStore::SESSIONS.size} sessions kept"
