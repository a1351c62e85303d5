# frozen_string_literal: true

require "test_helper"
require "fathom/always_on/always_on"
require "fathom/files/rotation"
require "fathom/pprof/reader"

# Always-on CPU and wall beside heap and gc, and sinks: every flush handed
# to each sink, with or without files, across fork, exec and SIGTERM.
class AlwaysOnTest < Minitest::Test
  # A real sink: records what it is given (in memory, and as lines in a
  # file when `log` is set, for the tests that exec or fork).
  class RecordingSink
    attr_reader :deliveries, :stops, :forks

    def initialize(log = nil)
      @log = log
      @deliveries = []
      @stops = []
      @forks = 0
    end

    def deliver(profile, mode:, from_ns:, until_ns:)
      @deliveries << [mode, profile, from_ns, until_ns]
      File.write(@log, "deliver #{mode} #{Process.pid} #{from_ns} #{until_ns} #{profile.bytes.bytesize}\n", mode: "a") if @log
    end

    def stop(timeout:)
      @stops << timeout
      File.write(@log, "stop #{Process.pid}\n", mode: "a") if @log
    end

    def after_fork_child
      @forks += 1
      @deliveries = []
      File.write(@log, "after_fork_child #{Process.pid}\n", mode: "a") if @log
    end

    def before_exec(timeout:)
      File.write(@log, "before_exec #{Process.pid} #{timeout.positive?}\n", mode: "a") if @log
    end
  end

  class RaisingSink < RecordingSink
    def deliver(_profile, **)
      raise IOError, "the backend is down"
    end
  end

  # A stop that never returns by itself (a hung connect).
  class HangingSink < RecordingSink
    attr_reader :release, :in_stop

    def initialize
      super
      @release = Queue.new
      @in_stop = Queue.new
    end

    def stop(timeout:)
      @in_stop << timeout
      @release.pop
    end
  end

  SINK_SOURCE = "#{File.read(__FILE__)[/^  class RecordingSink.*?^  end\n/m].gsub(/^  /, "")}".freeze

  def setup
    require_native!
    @dir = Dir.mktmpdir("fathom-always-on")
  end

  def teardown
    @always_on&.stop
    FileUtils.rm_rf(@dir)
  end

  def profiles(dir = @dir)
    Dir.children(dir).grep(Fathom::Files::Rotation::NAME).sort
  end

  def burn(seconds)
    t = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    x = 0
    x += 1 while Process.clock_gettime(Process::CLOCK_MONOTONIC) - t < seconds
    x
  end

  def test_cpu_and_wall_together_and_retention_are_refused
    e = assert_raises(ArgumentError) { Fathom::AlwaysOn.new(modes: "cpu,wall", dir: @dir) }
    assert_match(/modes cpu and wall cannot be profiled together/, e.message)
    e = assert_raises(ArgumentError) { Fathom::AlwaysOn.new(modes: "retention", dir: @dir) }
    assert_match(/retention snapshot walks the whole heap.*modes: heap, gc, cpu, wall/, e.message)
    e = assert_raises(ArgumentError) { Fathom::AlwaysOn.new(modes: "cpu") }
    assert_match(/dir must name a directory for the profiles, or sinks: must be given/, e.message)
    e = assert_raises(TypeError) { Fathom::AlwaysOn.new(modes: "cpu", sinks: [Object.new]) }
    assert_match(/sinks must respond to deliver, stop, after_fork_child/, e.message)
    assert_raises(TypeError) { Fathom::AlwaysOn.new(modes: "cpu", sinks: RecordingSink.new) }
  end

  # Each mode its own files, named for it; the CPU file holds the burn.
  # (At 10 ms, 0.3 s of CPU is ~30 samples: none at all would take a
  # broken sampler, not bad luck.)
  %w[cpu wall].each do |mode|
    define_method(:"test_#{mode}_runs_always_on_beside_heap_and_gc") do
      @always_on = Fathom::AlwaysOn.new(modes: "#{mode},heap,gc", dir: @dir, every: "100ms").start
      burn(0.3)
      @always_on.stop
      @always_on = nil
      names = profiles
      assert_equal %W[#{mode} gc heap].sort, names.map { |n| n[/\A[a-z]+/] }.uniq.sort, names.inspect
      samples = names.grep(/\A#{mode}-/).sum { |n| Fathom::Pprof.read_file(File.join(@dir, n)).samples.size }
      assert_operator samples, :>, 0
    end
  end

  # No dir: the sinks get every window, in order and back to back, and no
  # file is written anywhere (the test runs in an empty working directory).
  def test_sinks_without_a_dir_get_every_window_and_no_file_is_written
    sink = RecordingSink.new
    Dir.chdir(@dir) do
      @always_on = Fathom::AlwaysOn.new(modes: "cpu,gc", sinks: [sink], every: "50ms").start
      # Until each mode has had 3 ticks (a busy thread keeps the GVL from
      # the flusher for a time slice: short bursts, then a sleep) and 0.3 s
      # of CPU burned: ~30 samples at 10 ms, so none at all (Poisson,
      # e^-30) is a broken sampler, never luck.
      deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 60
      burned = 0.0
      until (burned >= 0.3 && %i[cpu gc].all? { |m| sink.deliveries.count { |d| d.first == m } >= 3 }) ||
            Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline
        burn(0.02)
        burned += 0.02
        sleep 0.01
      end
      @always_on.stop(timeout: 2)
      @always_on = nil
    end
    assert_empty Dir.children(@dir)
    by_mode = sink.deliveries.group_by(&:first)
    assert_equal %i[cpu gc], by_mode.keys.sort
    by_mode.each do |mode, list|
      assert_operator list.size, :>=, 3, mode
      list.each_cons(2) { |a, b| assert_equal a[3], b[2], "#{mode}: the windows are back to back" }
      list.each { |_, profile, from, till| assert_operator from, :<, till; assert_equal :pprof, profile.format }
      assert_equal Fathom::Modes.profile_kind(mode), list.first[1].kind
    end
    assert_equal [2.0], sink.stops.map { |t| t.round(0) }.uniq, "stop(timeout:) once, within the bound"
    cpu = by_mode[:cpu].sum { |_, p, _, _| Fathom::Pprof.read(p.bytes).samples.size }
    assert_operator cpu, :>, 0
  end

  # A sink that raises costs nothing else: files and the other sink go on,
  # the errors are counted and said once.
  def test_a_raising_sink_does_not_stop_the_flusher
    bad = RaisingSink.new
    good = RecordingSink.new
    _, err = capture_subprocess_io do
      @always_on = Fathom::AlwaysOn.new(modes: "gc", dir: @dir, sinks: [bad, good], every: "30ms").start
      sleep 0.3
      errors = @always_on.sink_errors
      assert @always_on.flushers[:gc].running?
      @always_on.stop
      @always_on = nil
      assert_operator errors[bad], :>=, 3
    end
    assert_equal 1, err.scan(/sink .*RaisingSink failed on gc profile: IOError: the backend is down/).size, err
    assert_equal profiles.size, good.deliveries.size, "each file was delivered to the good sink too"
  end

  # AlwaysOn#stop does not wait for a sink past the timeout: it returns
  # while the sink is still inside its stop, and says so.
  def test_stop_is_bounded_by_the_timeout
    sink = HangingSink.new
    _, err = capture_subprocess_io do
      Fathom::AlwaysOn.new(modes: "gc", sinks: [sink], every: "1h").start.stop(timeout: 0.3)
    end
    assert_in_delta 0.3, sink.in_stop.pop, 0.3, "the sink was given the timeout"
    assert_match(/HangingSink#stop did not finish within 0.3s; not waiting for it/, err)
    assert_equal 1, sink.deliveries.size, "the last window was delivered before the stop"
  ensure
    sink.release << :done
  end

  def run_ruby(code, env = {})
    Open3.capture3(TestHelper::PLAIN_ENV.merge(env), RbConfig.ruby, "-I#{TestHelper::LIB}", "-e", code)
  end

  # A forked child: its sinks get after_fork_child, then its own windows
  # (from its pid), its last at its stop; the parent's go on.
  def test_fork_child_gets_its_own_deliveries
    log = File.join(@dir, "log")
    code = <<~RUBY
      require "fathom"
      require "fathom/always_on/always_on"
      #{SINK_SOURCE}
      ao = Fathom::AlwaysOn.new(modes: "cpu", sinks: [RecordingSink.new(#{log.inspect})], every: "50ms").start
      sleep 0.2
      pid = fork { sleep 0.3; ao.stop; exit!(0) }
      Process.wait(pid)
      puts pid
      ao.stop
    RUBY
    out, err, status = run_ruby(code)
    assert status.success?, err
    child = out.to_i
    lines = File.readlines(log, chomp: true)
    pid_of = ->(line) { line.start_with?("deliver") ? line.split[2].to_i : line.split[1].to_i }
    child_lines = lines.select { |l| pid_of.call(l) == child }
    assert_equal "after_fork_child #{child}", child_lines.first, lines.inspect
    assert_operator child_lines.count { |l| l.start_with?("deliver cpu #{child} ") }, :>=, 2
    assert_equal "stop #{child}", child_lines.last
    assert_equal 1, lines.count { |l| l.start_with?("stop ") && l != "stop #{child}" }, "the parent stopped once"
  end

  # exec: the last window of each image is delivered before the exec
  # (with FATHOM_EVERY an hour, that is the only delivery of image 0).
  def test_exec_delivers_the_last_window
    log = File.join(@dir, "log")
    script = File.join(@dir, "reexec.rb")
    File.write(script, <<~RUBY)
      require "fathom"
      require "fathom/always_on/always_on"
      #{SINK_SOURCE}
      Fathom::AlwaysOn.new(modes: "wall", sinks: [RecordingSink.new(#{log.inspect})], every: "1h").start
      sleep 0.1
      if ARGV.empty?
        puts Process.clock_gettime(Process::CLOCK_REALTIME, :nanosecond)
        $stdout.flush
        exec(RbConfig.ruby, "-I#{TestHelper::LIB}", __FILE__, "again")
      end
    RUBY
    out, err, status = Open3.capture3(TestHelper::PLAIN_ENV, RbConfig.ruby, "-I#{TestHelper::LIB}", script)
    assert status.success?, err
    exec_ns = out.to_i
    lines = File.readlines(log, chomp: true)
    assert_equal ["before_exec #{lines.first.split[2]} true"], lines.grep(/\Abefore_exec /), lines.inspect
    assert_operator lines.index { |l| l.start_with?("deliver") }, :<, lines.index { |l| l.start_with?("before_exec") },
                    "the last window is delivered, then the sinks drain"
    delivered = lines.grep(/\Adeliver wall /)
    assert_equal 1, delivered.size, "image 0 delivered before the exec; image 1 never stopped its AlwaysOn: #{delivered}"
    until_ns = delivered.first.split[4].to_i
    assert_operator until_ns, :>=, exec_ns
    assert_operator until_ns, :<, exec_ns + 5_000_000_000
  end

  # fathom/setup with FATHOM_MODE=cpu,gc: SIGTERM writes the last file of
  # each mode, as heap's; a forked child writes its own.
  def test_sigterm_and_fork_write_cpu_files_through_setup
    env = { "RUBYOPT" => "-I#{TestHelper::LIB} -rfathom/setup", "FATHOM_DIR" => @dir, "FATHOM_MODE" => "cpu,gc",
            "FATHOM_EVERY" => "1h" }
    code = <<~'RUBY'
      def burn(s) = (t = Time.now; nil while Time.now - t < s)
      pid = fork { burn(0.2) }
      Process.wait(pid)
      puts pid
      $stdout.flush
      burn(60)
    RUBY
    Open3.popen3(TestHelper::PLAIN_ENV.merge(env), RbConfig.ruby, "-e", code) do |_, out, err, wait|
      child = out.gets.to_i
      sleep 0.3
      Process.kill(:TERM, wait.pid)
      refute wait.value.success?
      names = profiles
      assert_equal 4, names.size, "#{names.inspect}\n#{err.read}"
      assert_equal [child, wait.pid].sort, names.map { |n| n.split("-")[1].to_i }.uniq.sort
      assert_equal %w[cpu gc], names.map { |n| n[/\A[a-z]+/] }.uniq.sort
      assert_operator Fathom::Pprof.read_file(File.join(@dir, names.grep(/\Acpu-#{wait.pid}-/).first)).samples.size, :>, 0
    end
  end
end
