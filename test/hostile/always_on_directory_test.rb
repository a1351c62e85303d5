# frozen_string_literal: true

require "test_helper"
require "fathom/files/rotation"
require "fathom/process_comments"
require "fathom/pprof/reader"

# Always-on in a directory shared with others: what "safe to switch on in
# production" promises. Each test is a reproduction from the issue.
class AlwaysOnDirectoryTest < Minitest::Test
  def setup
    require_native!
    @base = Dir.mktmpdir("fathom-shared")
    @dir = File.join(@base, "fathom")
  end

  def teardown
    FileUtils.rm_rf(@base)
  end

  def env(extra = {})
    TestHelper::PLAIN_ENV.merge("RUBYOPT" => "-I#{TestHelper::LIB} -rfathom/setup", "FATHOM_DIR" => @dir).merge(extra)
  end

  def profiles(dir = @dir)
    Dir.children(dir).grep(Fathom::Files::Rotation::NAME)
  rescue Errno::ENOENT
    []
  end

  # Item 4: with umask 022 the files were 0644 in a 0755 directory, under
  # /var/tmp/fathom; a directory others may write to is said once.
  def test_files_0600_in_a_directory_created_0700
    _, err, status = Open3.capture3(env("FATHOM_MODE" => "heap,gc", "FATHOM_EVERY" => "50ms"), RbConfig.ruby, "-e",
                                    "File.umask(0o022); sleep 0.3", umask: 0o022)
    assert status.success?, err
    assert_equal 0o700, File.stat(@dir).mode & 0o7777
    files = Dir.children(@dir)
    refute_empty profiles
    files.each { |name| assert_equal 0o600, File.stat(File.join(@dir, name)).mode & 0o777, name }
    refute_match(/writable by/, err)
  end

  def test_a_directory_others_may_write_to_is_said_once
    Dir.mkdir(@dir)
    File.chmod(0o777, @dir)
    _, err, status = Open3.capture3(env("FATHOM_EVERY" => "20ms"), RbConfig.ruby, "-e", "sleep 0.2")
    assert status.success?, err
    assert_equal 1, err.scan(/#{Regexp.escape(@dir)} is writable by everyone/).size, err
    File.chmod(0o1777, @dir) # like /tmp: sticky, only owners remove files
    _, err, = Open3.capture3(env("FATHOM_EVERY" => "20ms"), RbConfig.ruby, "-e", "sleep 0.1")
    refute_match(/writable by/, err)
  end

  # Item 7: 4 forked processes x heap,gc every 100 ms with FATHOM_KEEP=10
  # left up to 13 files. FATHOM_KEEP counts per process and mode now
  # (issue 27: 8 workers x 2 modes shared 50 files, ~3 minutes of
  # history): a watcher listing the directory every 5 ms must never see
  # more than FATHOM_KEEP files of one process and mode (temporary files,
  # hidden, are not profiles), and at exit each of the 5 processes (the
  # parent too) x 2 modes has its own files, at most 3.
  def test_keep_holds_at_every_moment_across_processes
    code = <<~RUBY
      pids = 4.times.map { fork { t = Time.now; (a = []; 1000.times { a << "x" * 10 }) while Time.now - t < 5 } }
      pids.each { |pid| Process.wait(pid) }
    RUBY
    most = 0
    seen = 0
    done = false
    watcher = Thread.new do
      until done
        n = profiles.group_by { |name| Fathom::Files::Rotation.series(name) }.values.map(&:size).max || 0
        most = n if n > most
        seen += 1
        sleep 0.005
      end
    end
    _, err, status = Open3.capture3(env("FATHOM_MODE" => "heap,gc", "FATHOM_EVERY" => "100ms", "FATHOM_KEEP" => "3"),
                                    RbConfig.ruby, "-e", code)
    done = true
    watcher.join
    assert status.success?, err
    assert_operator seen, :>, 100
    assert_operator most, :<=, 3, "a listing showed #{most} profiles of one process and mode"
    series = profiles.group_by { |name| Fathom::Files::Rotation.series(name) }
    assert_equal 10, series.size, series.keys.inspect
    # Each wrote its last at exit; at most 3 (a loaded machine may have
    # let a process write fewer in 5 s).
    assert(series.values.all? { |names| (1..3).cover?(names.size) }, "the last files at exit are within the bound too: #{series}")
  end

  def test_keep_1_with_two_modes_ends_with_one_file_per_mode
    _, err, status = Open3.capture3(env("FATHOM_MODE" => "heap,gc", "FATHOM_EVERY" => "20ms", "FATHOM_KEEP" => "1"),
                                    RbConfig.ruby, "-e", "sleep 0.3")
    assert status.success?, err
    assert_equal %w[gc heap], profiles.map { |n| n[/\A[a-z]+/] }.sort, profiles.inspect
  end

  # Item 5: two containers sharing a volume, both pid 1, every 500 ms:
  # names collided and files replaced each other (6 files instead of 12).
  def test_two_processes_with_the_same_pid_keep_every_file
    ok = system("unshare", "-pf", "true", out: File::NULL, err: File::NULL)
    skip "unshare -pf true failed (needs root or user namespaces): cannot run two processes with pid 1" unless ok

    code = <<~RUBY
      t = Time.now
      (a = []; 1000.times { a << "x" * 10 }; sleep 0.005) while Time.now - t < 3 # a server waits on I/O too
      always_on = Fathom::AlwaysOn::Setup.always_on
      Fathom::AlwaysOn::Setup.stop
      puts "pid=\#{Process.pid} wrote=\#{always_on.flushers.values.sum(&:files_written)}"
    RUBY
    e = env("FATHOM_EVERY" => "500ms", "FATHOM_KEEP" => "1000")
    runs = 2.times.map { Thread.new { Open3.capture3(e, "unshare", "-pf", RbConfig.ruby, "-e", code) } }.map(&:value)
    wrote = runs.map do |out, err, status|
      assert status.success?, err
      assert_match(/\Apid=1 wrote=(\d+)\n\z/, out)
      out[/wrote=(\d+)/, 1].to_i
    end
    names = profiles
    assert_operator wrote.min, :>=, 4
    assert_equal wrote.sum, names.size, names.sort.inspect
    assert names.all? { |n| n.start_with?("heap-1-") }
    assert_equal 2, names.map { |n| n.split("-")[2] }.uniq.size, "one token per process"
  end

  # Item 6: a program that execs itself (same pid: puma's USR2) restarted
  # its index at 1 and replaced its own files, and lost the part of its run
  # after the last periodic file. Each image now writes its file before
  # exec, under its own token, its window ending at the exec.
  def test_exec_writes_a_file_per_image_none_replaced
    script = File.join(@base, "reexec.rb")
    File.write(script, <<~RUBY)
      gen = ARGV.first.to_i
      a = []
      20_000.times { a << "x" * 20 }
      sleep 0.2
      if gen < 2
        puts "exec \#{Process.clock_gettime(Process::CLOCK_REALTIME, :nanosecond)}"
        $stdout.flush
        gen.zero? ? exec(RbConfig.ruby, __FILE__, "1") : Process.exec(RbConfig.ruby, __FILE__, "2")
      end
      puts "exit \#{Process.pid}"
    RUBY
    out, err, status = Open3.capture3(env("FATHOM_EVERY" => "3600s"), RbConfig.ruby, script)
    assert status.success?, err
    exec_ns = out.scan(/^exec (\d+)$/).flatten.map(&:to_i)
    pid = out[/^exit (\d+)$/, 1]
    assert_equal 2, exec_ns.size, out
    names = profiles
    assert_equal 3, names.size, "one file per image: #{names.inspect}"
    assert names.all? { |n| n.start_with?("heap-#{pid}-") }, names.inspect
    assert_equal 3, names.map { |n| n.split("-")[2] }.uniq.size, "a token per image"
    windows = names.map { |n| Fathom::Pprof.read_file(File.join(@dir, n)) }
                   .map { |p| [p.time_nanos, p.time_nanos + p.duration_nanos] }.sort
    exec_ns.each_with_index do |at, i| # `at`: just before the exec call, whose hook flushes
      assert_operator windows[i][1], :>=, at, "image #{i}'s window runs to its exec"
      assert_operator windows[i][1], :<, at + 500_000_000, "image #{i}'s window ends at its exec"
      assert_operator windows[i + 1][0], :>=, windows[i][1] - 1_000_000, "the next image's window starts after it"
    end
  end

  # An exec that fails leaves profiling running; the hook never raises.
  def test_a_failed_exec_keeps_profiling
    code = <<~RUBY
      begin
        exec("/nonexistent/fathom-test")
      rescue SystemCallError => e
        puts e.class
      end
      ao = Fathom::AlwaysOn::Setup.always_on
      puts ao.running?(:heap), ao.flushers[:heap].running?
    RUBY
    out, err, status = Open3.capture3(env("FATHOM_EVERY" => "3600s"), RbConfig.ruby, "-e", code)
    assert status.success?, err
    assert_equal "Errno::ENOENT\ntrue\ntrue\n", out
    assert_equal 2, profiles.size, "the file before the exec and the last at exit"
  end
end
