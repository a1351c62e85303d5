# frozen_string_literal: true

require "test_helper"
require "fathom/rack"

# Server-like concurrency, in the normal and the ASan/UBSan builds: many
# threads fetching every endpoint at once (most get 429) while others
# allocate, per-request profiles started and stopped in a loop, and
# GC.compact in between.
class RackConcurrencyTest < Minitest::Test
  def env(path, query = "")
    { "REQUEST_METHOD" => "GET", "SCRIPT_NAME" => "", "PATH_INFO" => path, "QUERY_STRING" => query,
      "REMOTE_ADDR" => "127.0.0.1", "SERVER_PROTOCOL" => "HTTP/1.1" }
  end

  def setup
    require_native!
  end

  def test_concurrent_fetches_while_threads_allocate
    # The default interval: a flush yields the GVL every 2 ms and each
    # CPU-bound worker then keeps it for Ruby's 100 ms time slice, so at
    # 1 ms (16k samples a second) the heap fetches alone took a minute.
    profiler = Fathom::HeapProfiler.new(interval: "10ms").start
    app = Fathom::Rack::App.new(enabled: true, heap: profiler, max_seconds: 1, retention_max_objects: 1 << 30)
    stop = false
    kept = []
    workers = 3.times.map do
      Thread.new do
        until stop
          kept << Array.new(500) { |i| "w#{i}" }
          kept.shift while kept.size > 100 # a steady heap, as a server's
          # Hands the GVL on after each batch, as a server's threads do at
          # their I/O: a purely CPU-bound worker keeps it for Ruby's 100 ms
          # time slice at each of a fetch's many GVL yields, so under ASan
          # on a busy machine the test took 180 s (Ruby 3.1), the fetches
          # waiting, not working. The allocations still run between the
          # fetches' steps, more often than before.
          Thread.pass
        end
      end
    end
    statuses = Queue.new
    fetchers = 6.times.map do |k|
      Thread.new do
        paths = [["heap", ""], ["allocs", "gc=1"], ["gc", "seconds=1"], ["retention", ""], ["heap", "debug=1"]]
        5.times do |i|
          path, query = paths[(i + k) % paths.size]
          status, _, body = app.call(env("/debug/fathom/#{path}", query))
          body.each { |chunk| chunk.bytesize }
          statuses << status
          GC.compact if i == 2 && k.zero?
        end
      end
    end
    fetchers.each(&:join)
    stop = true
    workers.each(&:join)
    seen = Array.new(statuses.size) { statuses.pop }.tally
    assert_equal [200, 429].sort, (seen.keys | [200, 429]).sort, seen.inspect # nothing but served or refused
    assert_operator seen.fetch(200, 0), :>, 0
  ensure
    stop = true
    profiler&.stop
  end

  def test_per_request_profiles_in_a_loop
    page = ->(_) { [200, {}, [Array.new(100) { |i| "p#{i}" }.join]] }
    mw = Fathom::Rack::Middleware.new(page, enabled: true)
    20.times do |i|
      kind = %w[heap gc][i % 2]
      status, = mw.call(env("/", "fathom=#{kind}"))
      assert_equal 200, status
      GC.compact if i % 7 == 0
    end
  end
end
