# frozen_string_literal: true

require "test_helper"
require "support/forked_work"
require "zlib"
require "open3"

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
  # names' VALUEs are pinned until fork; the parent's GC comes back on at
  # once. In a Ruby of its own (the same build and environment, ASan's
  # too): under GC.stress every allocation is a full GC of the whole heap,
  # and in this process, after hundreds of tests, that made this test alone
  # take 3 to 7 minutes of each suite (445 s in one CI run).
  SCRIPT = <<~RUBY
    require "fathom"
    kept = Array.new(1000) { |i| { i => "v\#{i}" } }
    Thread.current[:fork_test_local] = kept.first
    GC.compact
    first = Fathom.retention_snapshot(progress: nil)
    GC.stress = true
    begin
      stressed = Fathom.retention_snapshot(progress: nil)
    ensure
      GC.stress = false
    end
    reaped = begin
      Process.wait(-1, Process::WNOHANG)
      false
    rescue Errno::ECHILD
      true
    end
    puts [first.stats[:walk], stressed.stats[:walk], GC.enable == false, reaped, kept.size].inspect
  RUBY

  def test_forked_snapshot_around_compaction_and_stress
    skip "GC.compact unsupported" unless GC.respond_to?(:compact)
    out, err, status = Open3.capture3(TestHelper::PLAIN_ENV, RbConfig.ruby, "-I#{TestHelper::LIB}", "-e", SCRIPT)
    assert status.success?, err
    walk, stressed_walk, gc_enabled_again, reaped, = eval(out.lines.last) # rubocop:disable Security/Eval -- our own script's inspect
    assert_equal [:forked, :forked], [walk, stressed_walk], err
    assert gc_enabled_again, "GC is enabled again in the parent"
    assert reaped, "every snapshot child was reaped"
  end
end
