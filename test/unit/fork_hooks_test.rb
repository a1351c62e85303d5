# frozen_string_literal: true

require "test_helper"
require "tmpdir"
require "rbconfig"

class ForkHooksTest < Minitest::Test
  class Recorder
    def initialize(io)
      @io = io
    end

    def after_fork_child
      @io.write("#{Process.pid}\n")
    end
  end

  class Broken
    def after_fork_child
      raise "cannot resume"
    end
  end

  def setup
    skip "fork unsupported" unless Process.respond_to?(:fork)
  end

  def with_registered(*objects)
    objects.each { |o| Fathom::ForkHooks.register(o) }
    yield
  ensure
    objects.each { |o| Fathom::ForkHooks.unregister(o) }
  end

  def child_pids_seen(&fork_style)
    assert_includes Process.singleton_class.ancestors, Fathom::ForkHooks::ProcessExtension if Fathom::ForkHooks.installed?
    reader, writer = IO.pipe
    recorder = Recorder.new(writer)
    with_registered(recorder) do
      pid = fork_style.call
      Process.wait(pid)
    end
    writer.close
    reader.read.split.map(&:to_i)
  end

  def test_every_fork_path_runs_the_hooks_in_the_child
    { "Kernel#fork" => -> { fork { exit!(0) } },
      "Process.fork" => -> { Process.fork { exit!(0) } },
      "fork without block" => -> { fork || exit!(0) } }.each do |name, style|
      pids = child_pids_seen(&style)
      assert_equal 1, pids.size, name
      refute_equal Process.pid, pids.first, "#{name}: hook ran in the parent"
    end
  end

  def test_unregistered_objects_are_not_called
    reader, writer = IO.pipe
    recorder = Recorder.new(writer)
    Fathom::ForkHooks.register(recorder)
    Fathom::ForkHooks.unregister(recorder)
    Process.wait(fork { exit!(0) })
    writer.close
    assert_equal "", reader.read
  end

  def test_registration_is_by_identity_and_idempotent
    a = Recorder.new(nil)
    Fathom::ForkHooks.register(a)
    Fathom::ForkHooks.register(a)
    assert_equal 1, Fathom::ForkHooks.registered.count { |o| o.equal?(a) }
  ensure
    Fathom::ForkHooks.unregister(a)
  end

  def test_a_failing_hook_does_not_break_the_child_or_the_others
    reader, writer = IO.pipe
    err_reader, err_writer = IO.pipe
    with_registered(Broken.new, Recorder.new(writer)) do
      # The hooks run before the child's block: swap $stderr around the fork.
      saved = $stderr
      $stderr = err_writer
      begin
        pid = fork { exit!(0) }
      ensure
        $stderr = saved
      end
      _, status = Process.wait2(pid)
      assert status.success?
    end
    writer.close
    err_writer.close
    assert_equal 1, reader.read.split.size
    assert_match(/fathom: ForkHooksTest::Broken could not resume after fork: RuntimeError: cannot resume/, err_reader.read)
  end

  # Process.daemon forks in C without Process._fork. The daemon must go on
  # sampling: at 1 ms for ~0.4 s of its own CPU time (wall time would count
  # the time a loaded machine leaves it waiting) it should take hundreds of
  # samples, where a dead timer thread takes at most one.
  def test_process_daemon_keeps_the_profiler_sampling
    Dir.mktmpdir do |dir|
      out = File.join(dir, "daemon.txt")
      script = <<~RUBY
        require "fathom"
        profiler = Fathom::HeapProfiler.new(interval: 0.001)
        profiler.start
        Process.daemon(true, true)
        kept = []
        t = Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID)
        kept << Object.new while Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID) - t < 0.4
        samples = profiler.flush.stats[:samples]
        File.write(#{"#{out}.tmp".inspect}, "running=\#{profiler.running?} samples=\#{samples}")
        File.rename(#{"#{out}.tmp".inspect}, #{out.inspect})
      RUBY
      pid = spawn(RbConfig.ruby, "-I#{File.expand_path("../../lib", __dir__)}", "-e", script)
      Process.wait(pid)
      deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 20
      sleep 0.05 until File.exist?(out) || Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline
      assert File.exist?(out), "the daemon wrote nothing"
      running, samples = File.read(out).scan(/=(\w+)/).flatten
      assert_equal "true", running
      # Ticks follow its CPU: 283-360 bursts (10 runs, both Rubies) of 64
      # candidates, all 40 B objects kept with p -> 1/4: mean >= 4,400
      # (measured 4,479-5,793). Chernoff for Bin(64 x 280, 1/4) <= 50:
      # < e^-2000. A dead timer takes at most one burst (<= 64).
      assert_operator samples.to_i, :>, 50, "the daemon's profiler stopped sampling"
    end
  end
end
