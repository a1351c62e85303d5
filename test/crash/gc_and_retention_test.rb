# frozen_string_literal: true

require "test_helper"
require_relative "../fixtures/leak_fixture"

# Crash-prone paths of the GC profiler and the retention snapshot, run in
# the normal and the ASan/UBSan builds: the GC hooks under GC.stress (every
# allocation runs a GC; a hook that allocated would recurse or corrupt the
# heap), GC.compact between and during snapshots, threads mutating the heap
# while a snapshot names references, start/stop loops and fork.
class GcAndRetentionCrashTest < Minitest::Test
  def setup
    require_native!
  end

  def asan?
    ENV["FATHOM_ASAN"] == "1"
  end

  def test_gc_hooks_under_gc_stress
    profiler = Fathom::GcProfiler.new(coalesce: 0) # coalesce: 0 always means the hooks
    kept = []
    profiler.start
    begin
      GC.stress = true
      (asan? ? 150 : 250).times { |i| kept << "s#{i}" * 2 } # >= 100 GCs; each is a full mark of the suite's heap
      GC.compact
    ensure
      GC.stress = false
      profiler.stop
    end
    stats = profiler.stats
    assert_operator stats[:cycles], :>=, 100, stats.inspect
    assert_equal 0, stats[:unmatched_exits]
    profile = profiler.flush
    assert_operator profile.report.length, :>, 0
    Fathom::GcProfiler.new(format: :firefox).profile { GC.start }.firefox_json
  end

  # The counters source reads Ruby's GC counters from its polling thread
  # and at start/stop/flush: under GC.stress every read happens next to a
  # GC, and GC.compact moves objects between reads.
  def test_gc_counters_under_gc_stress_and_compaction
    profiler = Fathom::GcProfiler.new(gc_source: :counters, coalesce: "1ms")
    kept = []
    before = GC.count
    profiler.start
    begin
      GC.stress = true
      (asan? ? 150 : 250).times { |i| kept << "s#{i}" * 2 } # >= 100 GCs; each is a full mark of the suite's heap
      GC.compact
      sleep 0.005 # let the polling thread read under stress
    ensure
      GC.stress = false
      profiler.stop
    end
    seen = GC.count - before
    stats = profiler.stats
    assert_equal :counters, stats[:source]
    assert_operator stats[:cycles], :>=, 100, stats.inspect
    assert_operator stats[:cycles], :<=, seen
    summary = Fathom::Report::GcSummary.new(Fathom::Pprof.read(profiler.flush.bytes))
    assert_equal stats[:cycles], summary.gc_count
    Fathom::GcProfiler.new(gc_source: :counters, format: :firefox).profile { GC.start }.firefox_json
  end

  def test_gc_profiler_start_stop_loop_and_fork_with_counters
    start_stop_loop_and_fork(Fathom::GcProfiler.new(gc_source: :counters))
  end

  def test_gc_profiler_start_stop_loop_and_fork
    start_stop_loop_and_fork(Fathom::GcProfiler.new(gc_source: :hooks))
  end

  def start_stop_loop_and_fork(profiler)
    50.times do
      profiler.start
      Array.new(2_000) { "x" * 10 }
      GC.start if rand < 0.2
      profiler.stop
    end
    profiler.start
    pid = fork do
      3.times { GC.start }
      profile = profiler.flush
      exit!(Fathom::Pprof.read(profile.bytes).samples.empty? ? 1 : 0)
    end
    Process.wait(pid)
    profiler.stop
    assert $?.success?, "the forked child profiles its own GCs"
  end

  def test_retention_snapshot_with_gc_compact
    LeakFixture.build
    GC.compact
    first = Fathom.retention_snapshot(progress: nil)
    GC.compact
    LeakFixture.build
    second = Fathom.retention_snapshot(progress: nil)
    assert_operator second.stats[:objects], :>, 1_000
    assert_operator first.stats[:objects], :>, 1_000
  ensure
    LeakFixture.clear
  end

  def test_retention_snapshot_while_threads_mutate_the_heap
    LeakFixture.build
    stop = false
    threads = 3.times.map do |t|
      Thread.new do
        local = {}
        i = 0
        until stop
          local[i % 500] = Array.new(20) { "t#{t}-#{i}" }
          GC.compact if t.zero? && (i % 200).zero?
          i += 1
        end
      end
    end
    (asan? ? 2 : 4).times { Fathom.retention_snapshot(progress: nil, gc: false) }
  ensure
    stop = true
    threads&.each(&:join)
    LeakFixture.clear
  end

  # Naming calls Ruby methods, at whose interrupt checks another thread may
  # run: GC must be enabled by then, or that thread allocates without ever
  # collecting and the heap only grows (a puma server under load: heap pages
  # x9 over a run). With GC disabled through naming this took the heap from
  # 1137 to 2584 pages in three snapshots; now it stays put.
  def test_threads_allocating_during_snapshots_do_not_grow_the_heap
    ballast = Array.new(asan? ? 100_000 : 300_000) { |i| "s#{i}" } # a heap whose naming takes a while
    stop = false
    allocated = 0
    allocator = Thread.new do
      until stop
        200.times { Object.new }
        allocated += 200
      end
    end
    sleep 0.05
    GC.start
    before = GC.stat(:heap_allocated_pages)
    3.times { Fathom.retention_snapshot(progress: nil) }
    stop = true
    allocator.join
    after = GC.stat(:heap_allocated_pages)
    assert_operator allocated, :>, 0
    assert_operator after, :<=, (before * 1.5).ceil, "heap pages #{before} -> #{after} while another thread allocated #{allocated} objects"
    assert_equal 300_000, ballast.size unless asan?
  ensure
    stop = true
    allocator&.join
  end

  # A GC.disable of the caller's outlives the snapshot (which turns GC back
  # on only if it turned it off).
  def test_snapshot_keeps_a_callers_gc_disable
    GC.disable
    Fathom.retention_snapshot(progress: nil, gc: false)
    assert_equal true, GC.enable, "GC still disabled after the snapshot"
    assert_equal false, GC.disable
    GC.enable
    Fathom.retention_snapshot(progress: nil, gc: false)
    assert_equal false, GC.enable, "GC enabled after the snapshot"
  ensure
    GC.enable
  end

  def test_bad_snapshot_options_raise
    assert_raises(TypeError) { Fathom.retention_snapshot(progress: 3) }
    assert_raises(TypeError) { Fathom.retention_snapshot(focus: "x") }
    assert_raises(ArgumentError) { Fathom.retention_snapshot(max_depth: 1) }
    assert_raises(ArgumentError) { Fathom.retention_snapshot(bogus: 1) }
  end
end
