# frozen_string_literal: true

require "test_helper"
require "support/rails_app"

# One request's profiles on the suite's Rails app without always-on
# (puma cluster mode, 1 worker so that every request meets the same
# process), and a retention snapshot taken while a slow request holds its
# records.
class RequestProfilesTest < Minitest::Test
  def setup
    require_native!
    RailsApp.require!(self)
    @server = RailsApp::Server.new({ "FATHOM_RACK" => "1", "SHOP_THREADS" => "3" }, workers: 1)
  end

  def teardown
    @server&.stop
  end

  def inuse_by_class(profile, klass)
    i = profile.sample_types.index { |t| t.first == "inuse_objects" }
    profile.samples.select { |s| s.labels["class"] == klass }.sum { |s| s.values[i] }
  end

  # Exact mode records every allocation of the request: the page's 2,000
  # Products are allocated (deterministic), and none is in use after it:
  # the controller that held them hangs off the env, which the middleware
  # gave the app as a copy it drops before the GC.
  def test_heap_of_one_request_counts_what_it_left_not_what_it_answered_with
    res = @server.get("/products?fathom=heap")
    assert_equal "200", res.code, res.body
    assert_equal "request", res["x-fathom-source"]
    profile = Fathom::Pprof.read(res.body)
    alloc = profile.sample_types.index { |t| t.first == "alloc_objects" }
    allocated = profile.samples.select { |s| s.labels["class"] == "Product" }.sum { |s| s.values[alloc] }
    assert_operator allocated, :>=, 2000
    assert_operator inuse_by_class(profile, "Product"), :<, 100, "the page's products are not in use after the request"
  end

  # A retention snapshot while /slow holds its 2,000 records on the request
  # thread's stack: they are charged to that puma thread, by name, and
  # not through the logger's Monitor (whose owner field points at the
  # request's fiber on 3.3) or any other global. Deterministic: the request
  # holds them for 6 s (small sleeps) and the snapshot comes 1.5 s after
  # it was sent, far past the time the action needs to load them (30-80 ms
  # measured; a second even beside a CPU-bound process).
  def test_retention_during_a_slow_request_names_the_request_thread
    slow = Thread.new { @server.get("/slow?seconds=6") }
    sleep 1.5
    # The snapshot's time grows with the machine's load (1-18 s beside the
    # suite's other process at load 4): the wait is generous, and said.
    started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    res = @server.get("/debug/fathom/retention", timeout: 240)
    took = Process.clock_gettime(Process::CLOCK_MONOTONIC) - started
    assert_equal "200", res.code, "after #{took.round(1)} s: #{res.body}"
    profile = Fathom::Pprof.read(res.body)
    i = profile.sample_types.index { |t| t.first == "inuse_objects" }
    products = profile.samples.select { |s| profile.stack_names(s).first.to_s.end_with?("(Product)") }
    chains = products.map { |s| [s.values[i], profile.stack_names(s).reverse.join(" → ")] }
    held = chains.select { |_, chain| chain.match?(/thread "puma srv tp \d+"/) }.sum(&:first)
    assert_operator held, :>=, 2000, chains.first(5).inspect
    refute chains.any? { |_, chain| chain.match?(/@logger|Monitor/) }, chains.first(5).inspect
    assert_match(/held 2000 products/, slow.value.body)
  end
end
