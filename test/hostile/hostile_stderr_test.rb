# frozen_string_literal: true

require "test_helper"

# Issue 10, item 3: a program that closes or replaces $stderr (or its
# descriptor 2, or $stdout) must not lose a profile, see its exit status
# changed, or find Fathom's messages in a file of its own.
class HostileStderrTest < Minitest::Test
  def setup
    require_native!
    @dir = Dir.mktmpdir("fathom-stderr")
  end

  def teardown
    FileUtils.rm_rf(@dir)
  end

  WORK = 'keep = []; 20_000.times { |i| keep << "x#{i}" * 3 }; $kept = keep'

  # fathom run --mode heap,gc,retention on `prelude` + some work.
  def run_all_modes(prelude)
    script = File.join(@dir, "prog.rb")
    File.write(script, "#{prelude}\n#{WORK}\n")
    out = File.join(@dir, "run")
    @stdout, err, status = TestHelper.run_fathom("run", "--mode", "heap,gc,retention", "--interval", "1ms", "-o", out,
                                            "--", RbConfig.ruby, script, env: TestHelper::PLAIN_ENV, chdir: @dir)
    files = %w[heap gc retention].map { |m| "#{out}.#{m}.pb.gz" }
    [files, err, status]
  end

  def assert_all_written(files, err, status)
    assert_equal 0, status.exitstatus, err
    files.each do |f|
      assert File.exist?(f), "#{File.basename(f)} missing; stderr: #{err}"
      Fathom::Pprof.read_file(f) # a whole profile
    end
  end

  def test_closed_stderr
    files, err, status = run_all_modes("$stderr.close")
    assert_all_written(files, err, status)
  end

  def test_stderr_whose_write_method_is_gone
    files, err, status = run_all_modes(<<~RUBY)
      o = Object.new
      def o.write(*) = 0
      $stderr = o
      o.singleton_class.send(:remove_method, :write)
    RUBY
    assert_all_written(files, err, status)
  end

  def test_stderr_whose_write_raises
    files, err, status = run_all_modes('o = Object.new; def o.write(*) = raise("no writes here"); $stderr = o')
    assert_all_written(files, err, status)
    refute_match(/no writes here/, err)
  end

  def test_stderr_set_to_a_string_io_gets_the_messages
    # Fathom writes after the program's own at_exit handlers: the StringIO
    # copies what it gets into a file to be seen.
    files, err, status = run_all_modes(<<~RUBY)
      require "stringio"
      class CopyingIO < StringIO
        def write(*parts) = File.write("captured.log", parts.join, mode: "a").then { super }
      end
      $stderr = CopyingIO.new
    RUBY
    assert_all_written(files, err, status)
    refute_match(/fathom: wrote/, err, "the messages go to the program's StringIO")
    assert_equal 3, File.read(File.join(@dir, "captured.log")).scan(/^fathom: wrote/).size
  end

  def test_closed_stdout
    files, err, status = run_all_modes("$stdout.close")
    assert_all_written(files, err, status)
    assert_match(/fathom: wrote heap profile/, err)
  end

  # IO#close keeps descriptors 0-2 open, so the program closes 2 itself;
  # its next file gets descriptor 2, and must not receive Fathom's messages.
  def test_descriptor_2_closed_and_reused_by_the_programs_file
    files, err, status = run_all_modes(<<~RUBY)
      require "fiddle"
      Fiddle::Function.new(Fiddle.dlopen(nil)["close"], [Fiddle::TYPE_INT], Fiddle::TYPE_INT).call(2)
      $log = File.open("app.log", "w")
      raise "expected descriptor 2, got \#{$log.fileno}" unless $log.fileno == 2
      $log.sync = true
      $log.write("app line\\n")
      at_exit { $log.write("app end\\n"); $log.close }
    RUBY
    assert_all_written(files, err, status)
    assert_equal "app line\napp end\n", File.read(File.join(@dir, "app.log"))
  end

  def test_descriptor_2_closed_outright
    files, err, status = run_all_modes(<<~RUBY)
      require "fiddle"
      Fiddle::Function.new(Fiddle.dlopen(nil)["close"], [Fiddle::TYPE_INT], Fiddle::TYPE_INT).call(2)
    RUBY
    assert_all_written(files, err, status)
  end

  def test_stderr_reopened_by_ruby_still_gets_the_messages
    files, err, status = run_all_modes('$stderr.reopen("err.log", "w")')
    assert_all_written(files, err, status)
    assert_match(/fathom: wrote heap profile/, File.read(File.join(@dir, "err.log")))
  end

  def test_retention_snapshot_progress_with_a_broken_stderr
    o = Object.new
    def o.write(*) = 0
    saved = $stderr
    $stderr = o
    o.singleton_class.send(:remove_method, :write)
    profile = Fathom.retention_snapshot(gc: false)
    assert_equal :retention, profile.kind
  ensure
    $stderr = saved
  end

  def test_fork_hook_failure_is_reported_without_breaking_the_child
    skip "fork unsupported" unless Process.respond_to?(:fork)
    failing = Object.new
    def failing.after_fork_child = raise("cannot resume")
    Fathom::ForkHooks.register(failing)
    reader, writer = IO.pipe
    saved = $stderr
    broken = Object.new
    def broken.write(*) = raise(IOError, "closed stream")
    def broken.flush = self # Ruby's fork flushes $stderr
    $stderr = broken
    pid = fork do
      reader.close
      writer.write("child ran")
      writer.close
      exit!(0)
    end
    $stderr = saved
    writer.close
    _, status = Process.wait2(pid)
    assert status.success?
    assert_equal "child ran", reader.read
  ensure
    $stderr = saved if saved
    Fathom::ForkHooks.unregister(failing)
  end
end
