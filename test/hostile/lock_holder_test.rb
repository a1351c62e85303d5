# frozen_string_literal: true

require "test_helper"
require "fathom/files/rotation"

# Issue 40, item 8: anyone who can open the always-on directory's
# .fathom.lock (another user in a shared directory, another container on
# the volume, a worker stopped mid-write) could hang the app's exit: a
# process holding flock(2) on it for 40 s made a 3 s program take 39.6 s
# to exit, and one holding it forever, forever.
class LockHolderTest < Minitest::Test
  # The shutdown the app is promised (AlwaysOn::Sinks::STOP_TIMEOUT: 5 s in all).
  SHUTDOWN_BOUND = 5.0
  HOLD = 60

  def setup
    require_native!
    @base = Dir.mktmpdir("fathom-lock-holder")
    @dir = File.join(@base, "fathom")
    Dir.mkdir(@dir, 0o700)
  end

  def teardown
    FileUtils.rm_rf(@base)
  end

  def monotonic
    Process.clock_gettime(Process::CLOCK_MONOTONIC)
  end

  # Another process locks the file and keeps it for HOLD seconds.
  def hold_the_lock
    reader, writer = IO.pipe
    holder = spawn(RbConfig.ruby, "-e", <<~RUBY, File.join(@dir, Fathom::Files::Rotation::LOCK_NAME), out: writer)
      lock = File.open(ARGV[0], File::RDWR | File::CREAT, 0o600)
      lock.flock(File::LOCK_EX)
      puts "held"
      $stdout.flush
      sleep #{HOLD}
    RUBY
    writer.close
    assert_equal "held\n", reader.gets
    holder
  ensure
    reader&.close
  end

  # The worst case for the exit: the lock is taken just before it, so the
  # first flush at exit waits the whole LOCK_TIMEOUT (the others, and the
  # periodic flushes while the lock stays held, do not wait again).
  def release(holder)
    return unless holder

    Process.kill(:KILL, holder)
    Process.wait(holder)
  end

  def test_a_lock_held_for_a_minute_neither_hangs_the_exit_nor_stops_the_files
    env = TestHelper::PLAIN_ENV.merge("RUBYOPT" => "-I#{TestHelper::LIB} -rfathom/setup", "FATHOM_DIR" => @dir,
                                      "FATHOM_MODE" => "heap,gc", "FATHOM_EVERY" => "200ms")
    # The program runs 1 s (its flushers rotate), waits for a line, then
    # says when it starts exiting (CLOCK_MONOTONIC: one clock for all
    # processes) and ends.
    script = <<~RUBY
      sleep 1
      puts "ready"
      $stdout.flush
      $stdin.gets
      puts Process.clock_gettime(Process::CLOCK_MONOTONIC)
      $stdout.flush
    RUBY
    out = err = holder = nil
    Open3.popen3(env, RbConfig.ruby, "-e", script) do |stdin, stdout, stderr, wait|
      errors = Thread.new { stderr.read }
      assert_equal "ready\n", stdout.gets
      holder = hold_the_lock
      stdin.puts "exit"
      stdin.close
      exiting = stdout.gets.to_f
      unless wait.join(HOLD / 3)
        Process.kill(:KILL, wait.pid)
        flunk "the app had not exited #{HOLD / 3} s after its program ended (the lock is held for #{HOLD} s)"
      end
      exit_s = monotonic - exiting
      err = errors.value
      out = stdout.read
      assert wait.value.success?, err
      assert_operator exit_s, :<=, SHUTDOWN_BOUND, "exit took #{exit_s.round(2)} s: #{err}"
      puts "\n  exit took #{exit_s.round(2)} s with the lock held by another process" if ENV["FATHOM_TEST_VERBOSE"]
    end
    said = err.lines.grep(/\.fathom\.lock is held by another process/)
    assert_equal 1, said.size, "said once: #{err}"
    assert_match(/not had in #{Fathom::Files::Rotation::LOCK_TIMEOUT}s/, said.first)
    # The last profile of each mode was written all the same.
    names = Dir.children(@dir).grep(Fathom::Files::Rotation::NAME)
    assert_equal %w[gc heap], names.map { |n| n[/\A[a-z]+/] }.uniq.sort, names.inspect
    assert_equal "", out.to_s
  ensure
    release(holder)
  end

  # Without the lock a write still keeps its own series' count (only this
  # process writes it), not the directory's byte bound; once the holder
  # lets go, the next write takes the lock again and brings the directory
  # back under it.
  def test_without_the_lock_only_the_byte_bound_waits
    profile = TestHelper.gzip("x" * 1000, fathom: true)
    rotation = Fathom::Files::Rotation.new(@dir, keep_files: 3, keep_bytes: profile.bytesize * 2, lock_timeout: 0.05)
    holder = hold_the_lock
    name = ->(i) { File.join(@dir, "heap-1-20261126T1015#{format("%02d", i)}Z-#{i}.pb.gz") }
    _, err = capture_io { 5.times { |i| assert rotation.write_new(name.(i), profile) } }
    assert_equal 1, err.lines.grep(/is held by another process/).size, err
    assert_equal [2, 3, 4].map { |i| File.basename(name.(i)) }, Dir.children(@dir).grep(Fathom::Files::Rotation::NAME).sort,
                 "the series' count held, the directory's bytes did not"
    assert_equal 5, rotation.skipped
    release(holder)
    holder = nil
    assert rotation.write_new(name.(5), profile)
    assert_equal [4, 5].map { |i| File.basename(name.(i)) }, Dir.children(@dir).grep(Fathom::Files::Rotation::NAME).sort
    assert_equal 5, rotation.skipped
  ensure
    release(holder)
  end
end
