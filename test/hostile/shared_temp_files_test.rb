# frozen_string_literal: true

require "test_helper"
require "timeout"

# Issue 40, item 9: two containers share a volume. Container B starting
# always-on cleaned up "stale" temporary files by the pid in their names,
# took container A's writer (a pid of A's namespace, not alive in B's) for
# dead, and deleted the temporary file of A's heap dump in progress: A's
# finished dump was lost (Errno::ENOENT from rb_file_s_link).
class SharedTempFilesTest < Minitest::Test
  # Container A: its pid 1 forks the writer, which dumps the heap; once
  # the dump's child runs it is stopped (SIGSTOP: a dump at nice 19 on a
  # busy machine, as slow as it gets, whatever this machine's speed),
  # "stopped" is said, and on a line from stdin it goes on. The writer's
  # pid is above 100 in A's namespace (short processes first: pids are
  # given in order there), like a puma worker's: in B's, where Ruby's own
  # threads take the first few ids (kill(0, tid) finds a thread), no such
  # process exists.
  WRITER = <<~RUBY
    if Process.pid == 1
      last = 0
      last = Process.wait(fork { exit!(0) }) while last < 100
      writer = fork
      if writer
        Process.wait(writer)
        exit!($?.exitstatus || 1)
      end
    end
    require "fathom"
    path = File.join(ARGV[0], "a.json.gz")
    ballast = Array.new(Integer(ARGV[1])) { |i| "ballast \#{i}" }
    children = -> { Dir.glob("/proc/self/task/*/children").flat_map { |f| File.read(f).split.map(&:to_i) } }
    # A dump so short that its child was never seen is taken again.
    5.times do
      dump = Thread.new { Fathom.heap_dump(path) rescue $! }
      child = nil
      while dump.alive? && child.nil?
        child = children.call.first
        sleep 0.001 unless child
      end
      unless child
        dump.join
        File.delete(path) if File.exist?(path)
        next
      end
      Process.kill(:STOP, child)
      puts "stopped"
      $stdout.flush
      $stdin.gets
      Process.kill(:CONT, child)
      result = dump.value
      puts(Exception === result ? "failed: \#{result.class}: \#{result.message}" : "wrote \#{result[:objects]} objects")
      $stdout.flush
      exit!(0)
    end
    puts "the dump's child was never seen"
  RUBY

  def setup
    require_native!
    skip "heap dumps need fork()" unless Process.respond_to?(:fork)
    skip "this build has no heap dumps" unless Fathom::Native.respond_to?(:heap_dump_forked)
    unless system("unshare", "--pid", "--fork", "--mount-proc", "true", out: File::NULL, err: File::NULL)
      skip "unshare --pid --fork --mount-proc failed (needs root): cannot run two pid namespaces"
    end
    @dir = Dir.mktmpdir("fathom-shared-temp")
  end

  def teardown
    FileUtils.rm_rf(@dir) if @dir
  end

  def namespaced(*args)
    ["unshare", "--pid", "--fork", "--mount-proc", RbConfig.ruby, "-I", TestHelper::LIB, *args]
  end

  # As if nobody had written the file for 10 minutes past STALE_AFTER.
  def backdate(path)
    long_ago = Time.now - Fathom::Files::AtomicFile::STALE_AFTER - 600
    File.utime(long_ago, long_ago, path)
  end

  # Container B starts always-on in the directory (the flusher's start
  # removes abandoned temporary files), then exits.
  def container_b_starts_always_on
    env = TestHelper::PLAIN_ENV.merge("RUBYOPT" => "-I#{TestHelper::LIB} -rfathom/setup", "FATHOM_DIR" => @dir,
                                      "FATHOM_MODE" => "heap", "FATHOM_EVERY" => "3600s")
    _, err, status = Open3.capture3(env, *namespaced("-e", "sleep 0.1"))
    assert status.success?, err
  end

  # A line from `io` within `seconds`, or a failure saying what came.
  def line_from(io, seconds)
    Timeout.timeout(seconds) { io.gets }
  rescue Timeout::Error
    flunk "no line from the writer in #{seconds} s"
  end

  def test_a_dump_in_progress_in_another_pid_namespace_keeps_its_temp_file
    Open3.popen2(TestHelper::PLAIN_ENV, *namespaced("-e", WRITER, @dir, "1000000")) do |stdin, stdout, wait|
      assert_equal "stopped\n", line_from(stdout, 120)
      temps = Dir.children(@dir).grep(/fathom-tmp\z/)
      assert_equal 1, temps.size, Dir.children(@dir).inspect
      # Written by a pid of A's namespace that B's has not.
      assert_operator temps.first[/\.(\d+)\.\h{8}\.fathom-tmp\z/, 1].to_i, :>=, 100, temps.first
      temp = File.join(@dir, temps.first)
      # A slow child may not write for minutes: only the lock says A is alive.
      backdate(temp)
      container_b_starts_always_on
      assert File.exist?(temp), "container B removed the temporary file of A's dump in progress"

      stdin.puts "go"
      assert_match(/\Awrote \d+ objects\n\z/, line_from(stdout, 300).to_s)
      assert wait.value.success?
    end
    assert File.size?(File.join(@dir, "a.json.gz")), "A's dump is in place"
    assert_empty Dir.children(@dir).grep(/fathom-tmp/)
  end

  # The other half: a temporary file whose writer is gone (its container
  # stopped mid-write: no lock held) and that nobody wrote for long is
  # removed by B's start, whatever pid its name holds.
  def test_an_abandoned_temp_file_of_another_namespace_is_removed
    temp = File.join(@dir, ".heap-1-0123abcd-20261126T101500Z-1.pb.gz.3.89abcdef#{Fathom::Files::AtomicFile::TMP_SUFFIX}")
    File.write(temp, "half a profile")
    backdate(temp)
    container_b_starts_always_on
    refute File.exist?(temp), "an abandoned temporary file was left"
  end
end
