# frozen_string_literal: true

require "test_helper"
require "support/forked_work"
require "zlib"

# Forked retention snapshots while 8 threads allocate and call into C
# (Zlib deflate without the GVL, sleep, pipe IO, malloc through String
# growth): at fork time another thread may hold a malloc arena lock, be
# inside zlib, or wait for the GVL. The child must neither hang (it would
# be killed at the deadline and the snapshot would raise) nor crash, and
# must always be reaped (docs/internals/retention.md, "Forked snapshots").
# Runs in the normal and the ASan/UBSan builds (rake test:asan), on each Ruby.
class RetentionForkCrashTest < Minitest::Test
  include ForkedWork

  def setup
    require_native!
  end

  def test_forked_snapshots_while_threads_allocate_and_call_into_c
    # Timing-free: a fixed number of snapshots, each asserted forked and
    # reaped; the deadline is generous so that only a real hang trips it.
    # The threads are busy when the child forks and sleep while it walks
    # (ForkedWork#busy_threads): at nice 19 it would otherwise be starved.
    with_busy_threads(yield_to_children: true) do |state|
      (asan? ? 3 : 6).times do
        profile = Fathom.retention_snapshot(progress: nil, fork_timeout: asan? ? 600 : 120)
        while_paused(state) do
          assert_equal :forked, profile.stats[:walk]
          assert_operator profile.stats[:objects], :>, 1000
          assert_empty children, "the child was reaped"
        end
      end
    end
    assert_empty children
  end

  # A GC.compact between snapshots and GC.stress around one: the prepared
  # names' VALUEs are pinned until fork; the parent's GC comes back on at once.
  def test_forked_snapshot_around_compaction_and_stress
    skip "GC.compact unsupported" unless GC.respond_to?(:compact)
    kept = Array.new(1000) { |i| { i => "v#{i}" } }
    Thread.current[:fork_test_local] = kept.first
    GC.compact
    profile = Fathom.retention_snapshot(progress: nil)
    assert_equal :forked, profile.stats[:walk]
    GC.stress = true
    begin
      profile = Fathom.retention_snapshot(progress: nil)
    ensure
      GC.stress = false
    end
    assert_equal :forked, profile.stats[:walk]
    assert GC.enable == false, "GC is enabled again in the parent"
    assert_empty children
  ensure
    Thread.current[:fork_test_local] = nil
  end
end
