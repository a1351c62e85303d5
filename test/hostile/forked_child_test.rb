# frozen_string_literal: true

require "test_helper"
require "socket"
require "support/child_watch"
require "fathom/files/rotation"

# Issue 40, items 5-7: the child that a retention snapshot or a heap dump
# forks holds nothing of the parent's but memory, dies with its parent,
# and a process the app forks meanwhile keeps none of their "in progress"
# state, nor a lock the app held. Each test holds the child still with
# SIGSTOP once it is under way (ChildWatch), so what it checks cannot race
# with the child's end, whatever the machine's speed.
class ForkedChildTest < Minitest::Test
  include ChildWatch

  # Enough heap that a child's walk lasts long enough to be seen (a tenth
  # of a second or more; a child is seen within a few ms, and one missed is
  # taken again). More only makes the children slower: they run at nice 19.
  BALLAST = 200_000

  def setup
    require_native!
    skip "fork" unless Process.respond_to?(:fork)
    @dir = Dir.mktmpdir("fathom-forked-child")
    @ballast = Array.new(BALLAST) { |i| "ballast #{i}" }
  end

  def teardown
    @ballast = nil
    FileUtils.rm_rf(@dir)
  end

  # Runs `work` (a lambda that forks a child and waits for it) on a thread
  # until its child is seen (again when a child ended too soon to be
  # seen), lets the child settle to `count` descriptors, stops it, and
  # yields its pid and descriptors; then lets it go on (or, with kill:,
  # kills it: a child at nice 19 on a busy machine takes its time) and
  # returns the work's value.
  def with_stopped_child(count, work, kill: false)
    5.times do
      thread = Thread.new(&work)
      child = await_child { thread.alive? }
      held = child && stop_when_settled(child, count)
      unless held
        thread.join
        next
      end
      begin
        yield child, held
      ensure
        Process.kill(kill ? :KILL : :CONT, child)
        # Also when the block failed: the work must not run on into the
        # next test (a dump still waiting there makes the next one refuse).
        thread.join rescue nil # rubocop:disable Style/RescueModifier -- its outcome is read below
      end
      return thread.value
    end
    flunk "the child was never seen at work: a bigger BALLAST is needed"
  end

  # Runs the block while a thread holds `rotation`'s lock, as a flusher in
  # the middle of a write does; yields a lambda that makes it let go.
  def while_a_writer_holds_the_lock(rotation)
    holding = Queue.new
    release = Queue.new
    writer = Thread.new { rotation.locked { holding << true; release.pop } }
    holding.pop
    yield lambda {
      release << true
      writer.join
    }
  ensure
    release&.<< true
    writer&.join
  end

  def assert_lock_free(why)
    File.open(File.join(@dir, Fathom::Files::Rotation::LOCK_NAME)) do |lock|
      assert lock.flock(File::LOCK_EX | File::LOCK_NB), why
    end
  end

  # Item 5 (and 6): a port the app closed is bound again at once, a client
  # whose connection the app closed sees end of file at once, a lock the
  # app let go is free at once; the child keeps 0-2 (on /dev/null) and its
  # pipe, nothing else.
  def test_a_snapshots_child_holds_no_socket_file_or_lock_of_the_apps
    server = TCPServer.new("127.0.0.1", 0)
    port = server.addr[1]
    client = TCPSocket.new("127.0.0.1", port)
    served = server.accept
    rotation = Fathom::Files::Rotation.new(@dir, keep_files: 10, keep_bytes: 1 << 20)
    profile = while_a_writer_holds_the_lock(rotation) do |let_go|
      with_stopped_child(SNAPSHOT_FDS, -> { Fathom.retention_snapshot(progress: nil) }) do |_child, held|
        assert_equal [0, 1, 2], held.keys.sort.first(3), held.inspect
        assert_equal ["/dev/null"] * 3, held.values_at(0, 1, 2), "stdio on /dev/null: #{held.inspect}"
        assert_equal 1, held.size - 3, "nothing but its pipe: #{held.inspect}"
        assert_match(/\Apipe:/, held.values.last)

        server.close
        again = TCPServer.new("127.0.0.1", port) # EADDRINUSE while the child held the listener
        again.close
        served.close
        assert IO.select([client], nil, nil, 1), "the client saw nothing within 1 s of the app closing its connection"
        assert_nil client.read_nonblock(1, exception: false), "end of file"
        let_go.call
        assert_lock_free("the directory's lock stayed held after the app let it go")
      end
    end
    assert_equal :forked, profile.stats[:walk]
    assert_operator profile.bytes.bytesize, :>, 0
  ensure
    [client, served, server].each { |io| io&.close unless io&.closed? }
  end

  # Item 5: a dump's child keeps its file (the temp file it writes) and
  # its pipe, nothing else.
  def test_a_dumps_child_holds_its_pipe_and_its_file_only
    skip "no heap dumps in this build" unless Fathom::Native.respond_to?(:heap_dump_forked)

    path = File.join(@dir, "heap.json.gz")
    stats = with_stopped_child(DUMP_FDS, -> { Fathom.heap_dump(path) }) do |_child, held|
      assert_equal ["/dev/null"] * 3, held.values_at(0, 1, 2), held.inspect
      rest = held.reject { |fd, _| fd <= 2 }.values
      assert_equal 2, rest.size, held.inspect
      assert_equal 1, rest.grep(/\Apipe:/).size, held.inspect
      assert_equal 1, rest.grep(%r{\A#{Regexp.escape(@dir)}/\.heap\.json\.gz\..*\.fathom-tmp\z}).size, held.inspect
    end
    assert_operator stats[:objects], :>, BALLAST
    assert File.size?(path)
  end

  # Item 5: a child whose parent was SIGKILLed ends within a second. The
  # app (another process) takes a snapshot; its child is stopped once
  # settled (a stopped child is one that would otherwise run on: only the
  # kernel's PR_SET_PDEATHSIG SIGKILL ends it), then the app is SIGKILLed.
  def test_a_child_dies_with_its_parent
    script = <<~RUBY
      require "fathom"
      ballast = Array.new(#{BALLAST}) { |i| "ballast \#{i}" }
      puts "ready"
      $stdout.flush
      loop { Fathom.retention_snapshot(progress: nil) }
    RUBY
    Open3.popen2(TestHelper::PLAIN_ENV, RbConfig.ruby, "-I", TestHelper::LIB, "-e", script) do |_, out, wait|
      app = wait.pid
      assert_equal "ready\n", out.gets
      # A child seen at its very end is let go: the next snapshot's is taken.
      child = nil
      5.times do
        child = await_child(app) { true }
        break if stop_when_settled(child, SNAPSHOT_FDS)

        sleep 0.001 while children(app).include?(child)
      end
      assert stopped?(child), "no child of the app could be stopped at work"
      Process.kill(:KILL, app)
      wait.value
      lived = time_until(5) { killed?(child) }
      begin
        refute_nil lived, "the child of a SIGKILLed app was not killed within 5 s"
        assert_operator lived, :<, 1.0
        gone = time_until(120) { gone?(child) }
        if ENV["FATHOM_TEST_VERBOSE"]
          puts "\n  the orphan was killed #{(lived * 1000).round(1)} ms after its parent was reaped, " \
               "gone after #{gone ? "#{(gone * 1000).round(1)} ms" : "more than 120 s"}"
        end
      ensure
        Process.kill(:KILL, child) rescue nil # rubocop:disable Style/RescueModifier -- gone, as it should be
      end
    end
  end

  # Item 6: a process the app forks while a thread holds the directory's
  # lock (a puma worker booting during a flush) closes its copy at once:
  # the lock is free as soon as the app lets it go, not when that process
  # exits.
  def test_a_process_forked_while_the_lock_is_held_does_not_keep_it
    rotation = Fathom::Files::Rotation.new(@dir, keep_files: 10, keep_bytes: 1 << 20)
    reader, writer = IO.pipe
    pid = nil
    while_a_writer_holds_the_lock(rotation) do |let_go|
      pid = fork do
        # ForkHooks ran before this block: whatever it closes is closed now.
        writer.puts "started"
        writer.close
        sleep 30
        exit!(0)
      end
      writer.close
      assert_equal "started\n", reader.gets
      let_go.call
      assert_lock_free("the forked process kept the directory's lock")
    end
  ensure
    reader&.close
    if pid
      Process.kill(:KILL, pid)
      Process.wait(pid)
    end
  end

  # Item 7: a process forked while a dump (or a snapshot) waits for its
  # child can dump and take snapshots: "in progress" was copied into it
  # and never cleared ("another heap dump is in progress" for life).
  def test_a_process_forked_during_a_dump_or_a_snapshot_can_do_both
    skip "no heap dumps in this build" unless Fathom::Native.respond_to?(:heap_dump_forked)

    # The parent's own dump and snapshot are killed once the check is done:
    # they fail (Fathom::Error), which is not what this test is about.
    { "dump" => -> { Fathom.heap_dump(File.join(@dir, "parent.json.gz")) rescue $! },
      "snapshot" => -> { Fathom.retention_snapshot(progress: nil) rescue $! } }.each do |during, work|
      # Stopped at once: what this is about is the parent's state.
      with_stopped_child(nil, work, kill: true) do
        reader, writer = IO.pipe
        pid = fork do
          reader.close
          @ballast = nil
          GC.start # a smaller heap to dump
          # In-process: what matters is whether it may start, and this
          # walk needs no child of its own at nice 19.
          results = [-> { Fathom.heap_dump(File.join(@dir, "child-#{during}.json.gz"))[:objects] },
                     -> { Fathom.retention_snapshot(progress: nil, fork: false).stats[:walk] }].map do |call|
            call.call.to_s
          rescue StandardError => e
            "#{e.class}: #{e.message}"
          end
          writer.write(results.join("\n"))
          writer.close
          exit!(0)
        end
        writer.close
        dumped, walked = reader.read.split("\n")
        Process.wait(pid)
        assert_match(/\A\d+\z/, dumped, "a heap dump in a process forked during a #{during}")
        assert_equal "in_process", walked, "a snapshot in a process forked during a #{during}"
      ensure
        reader&.close
      end
    end
  end

  # Item 7: a heap flush takes its census with GC off, yielding the GVL
  # between slices; a process forked then ran with GC off for good.
  def test_a_process_forked_during_a_census_runs_with_gc_on
    profiler = Fathom::HeapProfiler.new(interval: "1ms")
    collector = profiler.instance_variable_get(:@collector)
    collector.census_slice_ns = 1 # a page a slice: a yield after each
    collector.census_max_wall_ns = 60 * 1_000_000_000
    profiler.start
    1000.times { "x" * 100 }
    flush = Thread.new { profiler.flush }
    gc_off = false
    deadline = monotonic + 60
    # GC.disable says whether GC was off (and leaves it as it was then).
    until (gc_off = GC.disable) || !flush.alive? || monotonic > deadline
      GC.enable
      sleep 0.0002 # the flush's thread gets the GVL
    end
    GC.enable unless gc_off
    assert gc_off, "the census never ran with GC off (the test needs a census in slices)"
    reader, writer = IO.pipe
    pid = fork do
      reader.close
      writer.write(GC.enable ? "off" : "on") # GC.enable: whether it was off
      writer.close
      exit!(0)
    end
    writer.close
    assert_equal "on", reader.read, "GC in a process forked during a census"
    Process.wait(pid)
    flush.join
  ensure
    reader&.close
    profiler&.stop
  end
end
