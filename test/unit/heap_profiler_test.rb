# frozen_string_literal: true

require "test_helper"

# The Ruby face of the native collector (skipped without the extension,
# failing in CI).
class HeapProfilerTest < Minitest::Test
  class Allocator
    def make(n)
      Array.new(n) { Object.new }
    end
  end

  def setup
    require_native!
    @dir = Dir.mktmpdir("fathom-mp")
  end

  def teardown
    FileUtils.rm_rf(@dir) if @dir
  end

  def test_defaults_and_lifecycle
    profiler = Fathom::HeapProfiler.new
    refute profiler.exact
    assert_equal 10_000_000, profiler.interval_ns
    assert_equal 128, profiler.max_depth
    refute profiler.running?
    assert_same profiler, profiler.start
    assert profiler.running?
    assert_includes Fathom::ForkHooks.registered, profiler
    assert_same profiler, profiler.stop
    refute profiler.running?
    refute_includes Fathom::ForkHooks.registered, profiler
    assert_kind_of Hash, profiler.stats
  end

  def test_flush_returns_a_profile
    profiler = Fathom::HeapProfiler.new(exact: true)
    kept = nil
    profile = profiler.profile { kept = Allocator.new.make(1000) }
    refute profiler.running?
    assert_kind_of Fathom::Profile, profile
    %i[samples live_samples freed_samples flush_ns walk_ns encode_ns max_gvl_hold_ns gvl_yields bytes].each do |key|
      assert_kind_of Integer, profile.stats[key], key
    end
    decoded = profile.decode
    # Exactly the schema's types, in its order (core/heap/heap_schema.h):
    # Go's four first, then the counts behind them; new types go after.
    assert_equal Fathom::Native::HeapCollector.sample_types.map(&:first), decoded.sample_type_names
    assert_equal %w[alloc_objects alloc_space inuse_objects inuse_space alloc_samples inuse_samples],
                 decoded.sample_type_names.first(6)
    top = Fathom::Report::Top.new(decoded, sample_index: "inuse_objects", top: nil)
    make = top.rows.find { |r| r.name.include?("Allocator#make") }
    assert make, top.to_s
    assert_operator make.cum, :>=, 1000
    kept.size
  end

  def test_fathom_profile_writes_out
    out = File.join(@dir, "a/heap.pb.gz")
    yielded = nil
    profile = Fathom.profile(out: out, exact: true) { |p| yielded = p; Allocator.new.make(10) }
    assert_kind_of Fathom::HeapProfiler, yielded
    assert_equal out, profile.path
    assert_equal profile.bytes, File.binread(out)
  end

  def test_profile_stops_when_the_block_raises
    profiler = Fathom::HeapProfiler.new
    assert_raises(RuntimeError) { profiler.profile { raise "boom" } }
    refute profiler.running?
    Fathom::HeapProfiler.new.start.stop # the global slot is free again
  end

  def test_only_one_running
    a = Fathom::HeapProfiler.new.start
    assert_raises(Fathom::Error) { Fathom::HeapProfiler.new.start }
  ensure
    a&.stop
  end

  def test_flush_gc_option_is_validated
    profiler = Fathom::HeapProfiler.new
    assert_raises(TypeError) { profiler.flush(gc: 1) }
  end

  def test_memory_profiler_is_the_former_name
    assert_same Fathom::HeapProfiler, Fathom::MemoryProfiler
  end
end
