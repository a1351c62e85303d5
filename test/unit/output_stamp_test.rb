# frozen_string_literal: true

require "test_helper"
require "time"
require "json"
require "fathom/process_comments"

# Who wrote a profile (pid, hostname, Ruby, window) is written by the native
# encoder as it encodes (core/encode/output_stamp.h), for every profiler
# that writes pprof: no second pass over the gzipped bytes in Ruby.
class OutputStampTest < Minitest::Test
  def setup
    require_native!
  end

  STAMP_LINES = /\A(pid|hostname|ruby|window)=/.freeze

  # The stamp's lines come last, in order, and the window is the profile's
  # own time fields as an ISO 8601 interval (UTC, milliseconds).
  def assert_stamped(bytes, default_sample_type: nil)
    decoded = Fathom::Pprof.read(bytes)
    lines = decoded.comments.last(4)
    assert_equal ["pid=#{Process.pid}", "hostname=#{Fathom::ProcessComments.hostname}",
                  "ruby=#{RUBY_VERSION} (#{RUBY_PLATFORM})"], lines.first(3), decoded.comments.inspect
    start, stop = lines[3].delete_prefix("window=").split("/").map { |t| Time.iso8601(t) }
    assert_in_delta decoded.time_nanos / 1e9, start.to_f, 0.001
    assert_in_delta (decoded.time_nanos + decoded.duration_nanos) / 1e9, stop.to_f, 0.001
    assert_equal 4, decoded.comments.count { |c| c.match?(STAMP_LINES) }, "written once"
    assert_equal default_sample_type, decoded.default_sample_type if default_sample_type
    decoded
  end

  def test_heap_flush_with_a_default_sample_type
    profiler = Fathom::HeapProfiler.new(exact: true).start
    Array.new(100) { +"x" * 50 }
    profiler.stop
    decoded = assert_stamped(profiler.flush(stamp: Fathom::ProcessComments.stamp(default_sample_type: "alloc_space")).bytes,
                             default_sample_type: "alloc_space")
    refute_empty decoded.samples
    # Without a stamp: the profile's own comments only, its own default.
    profiler.start
    plain = Fathom::Pprof.read(profiler.stop.flush.bytes)
    assert_equal "inuse_space", plain.default_sample_type
    assert_empty plain.comments.grep(STAMP_LINES)
  end

  def test_gc_and_cpu_flushes
    gc = Fathom::GcProfiler.new.start
    GC.start
    gc.stop
    assert_stamped(gc.flush(stamp: Fathom::ProcessComments.stamp).bytes)

    cpu = Fathom::CpuProfiler.new(mode: :wall).start
    sleep 0.05
    cpu.stop
    assert_stamped(cpu.flush(stamp: Fathom::ProcessComments.stamp).bytes, default_sample_type: "wall")
  end

  def test_retention_snapshot
    profile = Fathom.retention_snapshot(stamp: Fathom::ProcessComments.stamp)
    assert_stamped(profile.bytes)
  end

  # A Firefox profile has its own meta: the stamp is not for it, and
  # nothing breaks when it is passed.
  def test_firefox_output_is_left_alone
    gc = Fathom::GcProfiler.new(format: :firefox).start
    GC.start
    gc.stop
    json = gc.flush(stamp: Fathom::ProcessComments.stamp).firefox_json
    refute_includes JSON.generate(json), "hostname="
  end

  def test_bad_stamps_raise_clear_errors
    profiler = Fathom::GcProfiler.new.start
    profiler.stop
    error = assert_raises(TypeError) { profiler.flush(stamp: "pid=1") }
    assert_match(/stamp must be nil or \[lines, default_sample_type\]/, error.message)
    assert_raises(TypeError) { profiler.flush(stamp: [[1], nil]) }
    assert_raises(TypeError) { profiler.flush(stamp: [["pid=1"], :cpu]) }
    # The format is checked first too, whatever the collector.
    [profiler, Fathom::CpuProfiler.new(mode: :cpu)].each do |p|
      collector = p.instance_variable_get(:@collector)
      error = assert_raises(ArgumentError) { collector.flush(:json, true, nil) }
      assert_equal "fathom: format must be :pprof or :firefox, got :json", error.message
    end
    # A sample type the profile does not have.
    error = assert_raises(Fathom::Error) { profiler.flush(stamp: [["pid=1"], "alloc_space"]) }
    assert_match(/alloc_space/, error.message)
  end
end
