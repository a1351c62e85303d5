# frozen_string_literal: true

require "test_helper"
require "open3"

# An exact heap profiler, stopped and not flushed, loses its FREEOBJ hook to
# the next profiler that starts. Its records' objects then die unseen: their
# slots are freed or reused, whole heap pages go back to the OS. Following
# those handles later crashed Ruby (GC.compact's reference update called
# rb_gc_location on an unmapped page: 3 runs in 3 on Ruby 3.1, 3.3 and 3.4;
# CI met it in test/integration/heap_census_test.rb) or counted dead objects
# live after a restart. SampleStore::ForgetObjects drops the handles.
class ExactHookLostTest < Minitest::Test
  # In a Ruby of its own: the crash takes the process down, and the pages
  # must really go back (the suite's own heap would keep them busy).
  SCRIPT = <<~'RUBY'
    require "fathom"
    exact = Fathom::HeapProfiler.new(exact: true)
    exact.start
    kept = Array.new(300_000) { "x" * 30 }
    exact.stop
    sampled = Fathom::HeapProfiler.new # takes the FREEOBJ hook away from `exact`
    sampled.start
    sampled.stop
    kept = nil
    5.times { GC.start(full_mark: true, immediate_sweep: true) } # frees the strings' pages
    3.times { GC.compact }
    puts "compacted"
    exact.start # a restart: the old records must not come back alive
    fresh = Array.new(1000) { "y" * 30 }
    exact.stop
    profile = exact.flush(gc: true)
    decoded = profile.decode
    inuse = decoded.sample_type_index("inuse_samples")
    strings = decoded.samples.select { |s| s.labels["class"] == "String" }
    puts "live strings=#{strings.sum { |s| s.values[inuse] }}"
    puts "liveness=#{profile.stats[:liveness]}"
    fresh.size
  RUBY

  def setup
    require_native!
    skip "GC.compact is not supported here" unless GC.respond_to?(:compact)
  end

  def test_records_whose_hook_went_are_never_followed
    out, err, status = Open3.capture3(TestHelper::PLAIN_ENV, RbConfig.ruby, "-I#{TestHelper::LIB}", "-e", SCRIPT)
    message = "stdout:\n#{out}\nstderr:\n#{err[0, 4000]}"
    assert status.success?, "the process did not exit normally (#{status.inspect})\n#{message}"
    assert_includes out, "compacted", message
    # The 300,000 dead strings count nowhere; the 1,000 kept since the
    # restart do (exact mode sees every allocation).
    live = out[/live strings=(\d+)/, 1].to_i
    assert_operator live, :>=, 1000, message
    assert_operator live, :<, 2000, message
  end
end
