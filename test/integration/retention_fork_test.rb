# frozen_string_literal: true

require "test_helper"
require "zlib"
require "support/profile_helpers"
require "support/forked_work"
require "support/pprof_raw"
require "open3"
require "tmpdir"

# A retention snapshot walked in a forked child against the in-process walk
# of the same heap: the same objects, the same retainers, the same sizes
# (docs/internals/retention.md, "Forked snapshots").
class RetentionForkTest < Minitest::Test
  include ProfileHelpers
  include ForkedWork

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

  # flat retained_space per retaining object, largest first.
  def top_retainers(raw, n)
    bytes = Hash.new(0)
    raw.function_names.each { |f| bytes[object_of(f)] += raw.flat("retained_space", f) }
    bytes.reject { |_, v| v.zero? }.sort_by { |f, v| [-v, f] }.first(n).to_h
  end

  # Both walks of one heap, in a Ruby of its own: this process's heap also
  # holds whatever other tests left behind (threads parked in a pool, a
  # server's sockets), and which of those a stale word on the C stack
  # reaches differs between the two walks (each walk scans its own thread's
  # C stack, conservatively). A thread so reached is held by two root
  # categories, so it is named by itself ("thread 123 (Thread)") rather
  # than as "vm → in vm → thread 123", and the top six would compare the
  # noise, not the snapshots (seen once in CI).
  COMPARE_PROGRAM = <<~RUBY
    require "fathom"
    table = {}
    2000.times { |i| table["k\#{i}"] = { name: "item \#{i}", tags: ["t\#{i % 7}", "x" * (i % 50)] } }
    Fixture = Module.new
    Fixture.const_set(:TABLE, table)
    session = Struct.new(:user, :rows)
    Fixture.const_set(:SESSIONS, Array.new(300) { |i| session.new("user\#{i}", Array.new(3) { |j| "r\#{j}" }) })
    # A first snapshot of each kind runs their Ruby code once, so that the
    # compared two find the same method caches and call caches ("Ruby
    # internals": the second walk otherwise holds ~1% more of them).
    Fathom.retention_snapshot(fork: false, progress: nil)
    Fathom.retention_snapshot(fork: true, progress: nil)
    GC.start
    in_process = Fathom.retention_snapshot(fork: false, progress: nil)
    forked = Fathom.retention_snapshot(fork: true, progress: nil)
    abort "walks: \#{in_process.stats[:walk]} \#{forked.stats[:walk]}" unless [in_process.stats[:walk], forked.stats[:walk]] == %i[in_process forked]
    File.binwrite(File.join(ARGV[0], "in_process.pb.gz"), in_process.bytes)
    File.binwrite(File.join(ARGV[0], "forked.pb.gz"), forked.bytes)
  RUBY

  # A frame by the object it names, whatever root path leads to it: a
  # thread is "vm → in vm → thread 123 (Thread)" in one walk and "thread
  # 123 (Thread)" in the other when a stale C-stack word in one of them
  # points at it (the same object, and the same bytes under it).
  def object_of(frame) = frame.split(" → ").last

  def test_forked_snapshot_matches_the_in_process_walk
    Dir.mktmpdir("fathom-fork-compare") do |dir|
      out, status = Open3.capture2e(TestHelper::PLAIN_ENV, RbConfig.ruby, "-I#{File.expand_path("../../lib", __dir__)}",
                                    "-e", COMPARE_PROGRAM, dir)
      assert status.success?, out
      compare_walks(PprofRaw.read(File.join(dir, "in_process.pb.gz")), PprofRaw.read(File.join(dir, "forked.pb.gz")))
    end
  end

  def compare_walks(a, b)
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
    %w[Fixture::TABLE Fixture::SESSIONS].each do |constant|
      frame = a.function_names.find { |f| f.include?("#{constant} (") }
      refute_nil frame, "#{constant} in #{a.function_names.grep(/Fixture/).inspect}"
      under = a.cum("inuse_objects", frame)
      assert_in_delta under, b.cum("inuse_objects", frame), under * 0.01, "objects under #{frame}"
      assert_equal frame, b.function_names.find { |f| f.include?("#{constant} (") }
    end
    table = b.function_names.find { |f| f.include?("::TABLE (") }
    assert_in_delta (2000 * 6) + 1, b.cum("inuse_objects", table), 2000 * 6 * 0.01
    top_a = top_retainers(a, 6)
    top_b = top_retainers(b, 6)
    assert_equal top_a.keys.sort, top_b.keys.sort, "top retainers: in-process #{top_a}, forked #{top_b}"
    top_a.each { |object, bytes| assert_in_delta bytes, top_b.fetch(object), bytes * 0.01, object }
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
