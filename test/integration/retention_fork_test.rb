# frozen_string_literal: true

require "test_helper"
require "zlib"
require "support/profile_helpers"

# A retention snapshot walked in a forked child against the in-process walk
# of the same heap: the same objects, the same retainers, the same sizes
# (docs/internals/retention.md, "Forked snapshots").
class RetentionForkTest < Minitest::Test
  include ProfileHelpers

  module ForkFixture
    # Hashes of strings and arrays under a constant, as bench/scale.rb
    # builds them: each entry is 1 Hash + 2 Strings + 1 Array + 2 Strings.
    TABLE = {}
    Session = Struct.new(:user, :rows)
    SESSIONS = []
  end

  def setup
    require_native!
    skip_unless_go!
    return unless ForkFixture::TABLE.empty?

    2000.times do |i|
      ForkFixture::TABLE["k#{i}"] = { name: "item #{i}", tags: ["t#{i % 7}", "x" * (i % 50)] }
    end
    300.times { |i| ForkFixture::SESSIONS << ForkFixture::Session.new("user#{i}", Array.new(3) { |j| "r#{j}" }) }
  end

  def children
    Dir["/proc/#{Process.pid}/task/*/children"].flat_map { |f| File.read(f).split }
  rescue Errno::ENOENT
    []
  end

  # flat retained_space per frame name, largest first.
  def top_retainers(raw, n)
    raw.function_names.map { |f| [f, raw.flat("retained_space", f)] }.reject { |_, v| v.zero? }
       .sort_by { |f, v| [-v, f] }.first(n)
  end

  def test_forked_snapshot_matches_the_in_process_walk
    GC.start
    in_process = Fathom.retention_snapshot(fork: false, progress: nil)
    forked = Fathom.retention_snapshot(fork: true, progress: nil)
    assert_equal :in_process, in_process.stats[:walk]
    assert_equal :forked, forked.stats[:walk]
    assert_empty children, "the forked child was reaped"

    a = raw_of(in_process)
    b = raw_of(forked)
    # Both walks count the same objects and retainers, up to what the C
    # stack's conservative roots (machine_context) hold at the moment of
    # each walk: a word left on the stack that points at one of the
    # fixture's strings makes it reachable from two root categories, so no
    # object of the fixture dominates it (seen: 1 of 12001 objects, 163 of
    # 832k bytes, in either walk; in CI once 8 of 12001). A stale word
    # takes at most one entry's subgraph (6 objects) out from under the
    # constant, and only a few stack words are stale at once, so 1% (20
    # entries' worth) bounds it without depending on luck; the whole heap
    # likewise differs by a handful of objects out of 50k.
    %w[ForkFixture::TABLE ForkFixture::SESSIONS].each do |constant|
      frame = a.function_names.find { |f| f.include?("#{constant} (") }
      refute_nil frame, "#{constant} in #{a.function_names.grep(/Fixture/).inspect}"
      under = a.cum("inuse_objects", frame)
      assert_in_delta under, b.cum("inuse_objects", frame), under * 0.01, "objects under #{frame}"
      assert_equal frame, b.function_names.find { |f| f.include?("#{constant} (") }
    end
    table = b.function_names.find { |f| f.include?("::TABLE (") }
    assert_in_delta (2000 * 6) + 1, b.cum("inuse_objects", table), 2000 * 6 * 0.01
    top_a = top_retainers(a, 6).to_h
    top_b = top_retainers(b, 6).to_h
    assert_equal top_a.keys.sort, top_b.keys.sort
    top_a.each { |frame, bytes| assert_in_delta bytes, top_b.fetch(frame), bytes * 0.01, frame }
    total_a = a.total("inuse_objects")
    total_b = b.total("inuse_objects")
    assert_in_delta total_a, total_b, total_a * 0.01, "objects: in-process #{total_a}, forked #{total_b}"
  end

  def test_profile_says_which_walk_ran
    forked = Fathom.retention_snapshot(progress: nil)
    text = Zlib.gunzip(forked.bytes)
    assert_includes text, "walk=forked"
    assert_operator forked.stats[:fork_ns], :>, 0
    assert_operator forked.stats[:child_ns], :>, 0
    assert_operator forked.stats[:objects], :>, 10_000
    in_process = Fathom.retention_snapshot(fork: false, progress: nil)
    assert_includes Zlib.gunzip(in_process.bytes), "walk=in-process"
  end

  def test_environment_variable_turns_forking_off
    with_env("FATHOM_RETENTION_FORK" => "0") do
      assert_equal :in_process, Fathom.retention_snapshot(progress: nil).stats[:walk]
    end
    with_env("FATHOM_RETENTION_FORK" => "yes") do
      error = assert_raises(ArgumentError) { Fathom.retention_snapshot(progress: nil) }
      assert_match(/FATHOM_RETENTION_FORK must be 0 or 1/, error.message)
    end
  end

  def test_focus_walks_in_process
    profile = Fathom.retention_snapshot(focus: [ForkFixture::SESSIONS.first], progress: nil)
    assert_equal :in_process, profile.stats[:walk]
    refute_nil profile.stats[:focus_paths].first
  end

  def test_bad_fork_options
    assert_raises(TypeError) { Fathom.retention_snapshot(fork: 1) }
    error = assert_raises(ArgumentError) { Fathom.retention_snapshot(fork_timeout: 0) }
    assert_match(/fork_timeout/, error.message)
  end

  # Thread#kill of the thread waiting for the child: the child is killed
  # and reaped, not left running or as a zombie.
  def test_killing_the_waiting_thread_ends_the_child
    big = Array.new(200_000) { |i| "s#{i}" }
    waiter = Thread.new { Fathom.retention_snapshot(progress: nil) }
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 30
    sleep 0.001 while children.empty? && waiter.alive? && Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
    waiter.kill
    waiter.join
    assert_empty children, "no child left behind"
    big.clear
  end

  def with_env(vars)
    saved = vars.to_h { |k, _| [k, ENV.fetch(k, nil)] }
    vars.each { |k, v| ENV[k] = v }
    yield
  ensure
    saved.each { |k, v| ENV[k] = v }
  end
end
