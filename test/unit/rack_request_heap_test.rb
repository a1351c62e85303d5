# frozen_string_literal: true

require "test_helper"
require "fathom/rack"

# Issue 43, defect 1: a per-request heap profile (?fathom=heap) was mostly
# Fathom's own: the thread the middleware runs the app on (its Thread.new
# was 94% of the allocated bytes: a thread's stack) and the fork hook
# around it were allocated inside the profile, and in-use rows were
# Middleware#run_app and Guard.stop_in_child. The middleware now makes
# both before the profiler starts. Exact mode counts every allocation, so
# the shares below are measured, not estimated: deterministic.
class RackRequestHeapTest < Minitest::Test
  FATHOM_LIB = File.join(TestHelper::LIB, "fathom")

  module Page
    KEEP = []

    def self.call(_env)
      rows = Array.new(200) { |i| { id: i, name: "row #{i}" } }
      KEEP << rows.first(20).map(&:dup) # what the request leaves behind
      [200, { "content-type" => "text/html" }, [rows.map { |r| r[:name] }.join(",")]]
    end
  end

  def setup
    require_native!
  end

  def env
    { "REQUEST_METHOD" => "GET", "PATH_INFO" => "/", "QUERY_STRING" => "fathom=heap", "REMOTE_ADDR" => "127.0.0.1", "SERVER_PROTOCOL" => "HTTP/1.1",
      "HTTP_HOST" => "localhost", "rack.input" => StringIO.new }
  end

  def profile_of_one_request
    status, _, body = Fathom::Rack::Middleware.new(Page, enabled: true).call(env)
    assert_equal 200, status, body.join
    Fathom::Pprof.read(body.join)
  end

  # [Fathom's share, the whole] of a value type, by each sample's site: its
  # innermost frame in a Ruby file (C methods have "<cfunc>").
  def fathom_share(profile, type)
    i = profile.sample_type_index(type)
    total = fathom = 0
    profile.samples.each do |s|
      total += s.values[i]
      files = s.location_ids.flat_map { |id| profile.locations[id].map { |fid, _| profile.functions[fid].filename } }
      site = files.find { |f| !f.empty? && !f.start_with?("<") }
      fathom += s.values[i] if site.to_s.start_with?(FATHOM_LIB)
    end
    [fathom, total]
  end

  def test_the_request_is_what_its_heap_profile_shows
    profile = profile_of_one_request
    threads = profile.samples.count { |s| profile.stack_names(s).include?("Thread.new") }
    assert_equal 0, threads, "the request's thread is made before the profile starts"

    fathom, total = fathom_share(profile, "alloc_space")
    assert_operator total, :>, 10_000, "the page's own allocations are in the profile"
    assert_operator fathom, :<, total * 0.05, "Fathom's own allocations are a sliver of the request's"

    fathom, total = fathom_share(profile, "inuse_space")
    assert_operator total, :>, 0
    assert_operator fathom, :<, total * 0.1, "in-use rows are the request's, not the middleware's"
    inuse = profile.sample_type_index("inuse_objects")
    held = profile.samples.select { |s| s.labels["class"] == "Thread" }.sum { |s| s.values[inuse] }
    assert_equal 0, held, "no thread of Fathom's is in use"
  end

  # The request's thread waits for the env; when the profiler cannot start
  # it is never given one, and must not be left waiting.
  def test_no_thread_is_left_waiting_when_the_profiler_cannot_start
    @holder = Fathom::HeapProfiler.new.start
    before = Thread.list.size
    status, = Fathom::Rack::Middleware.new(Page, enabled: true).call(env)
    assert_equal 409, status
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 10
    sleep 0.01 while Thread.list.size > before && Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
    assert_equal before, Thread.list.size
  ensure
    @holder&.stop
  end
end
