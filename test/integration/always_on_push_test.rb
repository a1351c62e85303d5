# frozen_string_literal: true

require_relative "../test_helper"
require "open3"
require "socket"
require "support/push_receiver"
require "support/profile_helpers"
require "fathom/leaks/window"
require "fathom/pprof/reader"

# Always-on with FATHOM_PUSH and no FATHOM_DIR, as a deploy turns it on:
# RUBYOPT=-rfathom/setup in a program that knows nothing of Fathom. Every
# mode's profiles reach the loopback receiver (decoded with protoc from
# pyroscope's definitions), each window once, labelled; no file is written
# anywhere. Nothing is timed: the program's length only sets how many
# windows there are, and the assertions count what the program says it
# flushed against what the receiver got.
class AlwaysOnPushTest < Minitest::Test
  include ProfileHelpers

  NAMES = { "cpu" => "process_cpu", "heap" => "memory", "gc" => "fathom_gc" }.freeze

  def setup
    require_native!
    skip_unless_protoc!
    @receiver = PushReceiver.new
    @cwd = Dir.mktmpdir("fathom-push-cwd")
  end

  def teardown
    @receiver&.close
    FileUtils.rm_rf(@cwd) if @cwd
  end

  # Burns CPU and allocates for `seconds`, then exits (at_exit writes, here
  # sends, the last window of each mode). Prints the CPU time its loop
  # burned (s), then the client's sent/dropped/failed counts and its pid,
  # so the test can count.
  PROGRAM = <<~RUBY
    finish = Process.clock_gettime(Process::CLOCK_MONOTONIC) + Float(ARGV[0])
    cpu0 = Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID)
    kept = []
    while Process.clock_gettime(Process::CLOCK_MONOTONIC) < finish
      kept << ("x" * 200) if kept.size < 50_000
      200.times { |i| i.to_s }
    end
    puts Process.clock_gettime(Process::CLOCK_PROCESS_CPUTIME_ID) - cpu0
    GC.start
    always_on = Fathom::AlwaysOn::Setup.always_on
    Fathom::AlwaysOn::Setup.stop # the last windows, sent (or given up) within the stop bound
    stats = always_on&.sinks&.list&.first&.stats || {}
    puts stats.values_at(:sent, :dropped, :failed).join(" ")
    puts Process.pid
    $stdout.flush
  RUBY

  def run_program(env, seconds)
    full = TestHelper::PLAIN_ENV.merge("RUBYOPT" => "-I#{TestHelper::LIB} -rfathom/setup", "FATHOM_DIR" => nil).merge(env)
    Open3.capture3(full, RbConfig.ruby, "-e", PROGRAM, seconds.to_s, chdir: @cwd)
  end

  def test_every_mode_is_pushed_per_window_with_labels_and_no_file
    skip_unless_go!
    out, err, status = run_program({ "FATHOM_MODE" => "cpu,heap,gc", "FATHOM_PUSH" => @receiver.url,
                                     "FATHOM_EVERY" => "1s", "FATHOM_SERVICE" => "checkout",
                                     "FATHOM_LABELS" => "region=eu,deploy=42", "FATHOM_PUSH_TOKEN" => "tok-9" }, 3.5)
    assert status.success?, err
    pid = out.lines.last.to_i
    sent, dropped, failed = out.lines[-2].split.map(&:to_i)
    assert_match(/always-on cpu,heap,gc profiling into Fathom::Push::Client/, err)
    refute_match(/tok-9/, err, "the token is never printed")

    series = @receiver.requests.map { |r| PushReceiver.decode(r) }.flatten
    by_name = series.group_by { |s| s.label("__name__") }
    assert_equal NAMES.values.sort, by_name.keys.sort, series.map(&:labels).inspect
    # Every profile the client counts as sent arrived, none failed. 3.5 s
    # at 1 s: three periodic windows per mode and the last one at stop; a
    # tick is skipped only while a flush still runs (none take near a
    # second). The queue (8) may drop the oldest when the sender thread
    # gets few GVL turns beside the busy main thread: counted, and every
    # window is either sent or counted as dropped.
    assert_equal [series.size, 0], [sent, failed], "dropped #{dropped}"
    assert_operator sent + dropped, :>=, 3 * 3
    by_name.each do |name, list|
      list.each do |s|
        assert_equal [pid.to_s, "checkout", "eu", "42", "false", Socket.gethostname],
                     %w[pid service_name region deploy __delta__ hostname].map { |l| s.label(l) }, name
        assert_equal 1, s.samples.size
      end
      ids = list.map { |s| s.samples.first.id }
      assert_equal ids.uniq, ids, "#{name}: each window sent once"
    end
    cpu = by_name.fetch("process_cpu").map { |s| raw_of(Fathom::Profile.new(s.samples.first.raw_profile)) }
    assert(cpu.all? { |raw| raw.sample_types.include?("cpu") })
    # The program's loop burned up to 3.5 s of CPU, less beside another
    # busy process: the pushed CPU profiles together hold most of what it
    # printed (a sample per 10 ms of CPU time, weighted by the measured
    # delta; GC and exit cut little), when no window was dropped. Measured
    # against the program's own clock, not the wall time it ran, so the
    # bound holds however much CPU the machine gave it.
    loop_cpu_s = Float(out.lines[-3])
    total_s = cpu.sum { |raw| raw.total("cpu") } / 1e9
    assert_operator total_s, :>=, 0.8 * loop_cpu_s, "pushed CPU #{total_s} s of #{loop_cpu_s} s" if dropped.zero?
    assert_empty Dir.children(@cwd), "no file is written without FATHOM_DIR"
    @receiver.requests.each { |r| assert_equal "Bearer tok-9", r.headers["authorization"] }
  end

  # FATHOM_LEAKS=1 beside FATHOM_PUSH (Leaks::PushLabels): once the steady
  # leak app's leak is confident (exact mode: deterministic, at window 8 of
  # 16), the pushed heap windows carry leak="growing" on that site's
  # samples, and on no other site's.
  def test_pushed_heap_windows_carry_the_leak_verdicts
    fixture = File.join(TestHelper::ROOT, "test/fixtures/leaks/scenarios.rb")
    site_line = File.readlines(fixture).index { |l| l.include?("site: steady") } + 1
    env = TestHelper::PLAIN_ENV.merge("FATHOM_DIR" => nil, "FATHOM_PUSH" => @receiver.url, "FATHOM_SERVICE" => "leaky",
                                      "FATHOM_MODE" => "heap", "FATHOM_EVERY" => "1h", "FATHOM_LEAKS" => "1",
                                      "FATHOM_EXACT" => "1", "LEAK_GC" => "1", "LEAK_WINDOWS" => "16")
    _out, err, status = Open3.capture3(env, RbConfig.ruby, "-I#{TestHelper::LIB}", "-rfathom/setup", fixture, "steady",
                                       chdir: @cwd)
    assert status.success?, err
    assert_match(/^fathom: LEAK  \S*scenarios\.rb:#{site_line} \(String\)/, err)
    heaps = @receiver.requests.map { |r| PushReceiver.decode(r) }.flatten.select { |s| s.label("__name__") == "memory" }
    refute_empty heaps
    labelled = heaps.flat_map do |series|
      profile = Fathom::Pprof.read(series.samples.first.raw_profile)
      frames = Fathom::Report::Frames.new(profile)
      profile.samples.select { |x| x.labels["leak"] == "growing" }
             .map { |x| Fathom::Leaks::Window.site_of(frames, x.location_ids).last.line }
    end
    refute_empty labelled, "no pushed heap window carries the verdict"
    assert_equal [site_line], labelled.uniq
  end

  # The server is down: the program runs as it would (its exit is not held
  # up past the push client's bounded stop) and says nothing it should not.
  def test_server_down_costs_the_program_nothing_but_a_bounded_stop
    probe = TCPServer.new("127.0.0.1", 0)
    port = probe.addr[1]
    probe.close
    started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    _out, err, status = run_program({ "FATHOM_MODE" => "cpu,heap", "FATHOM_PUSH" => "pyroscope://127.0.0.1:#{port}",
                                      "FATHOM_EVERY" => "500ms" }, 1.5)
    took = Process.clock_gettime(Process::CLOCK_MONOTONIC) - started
    assert status.success?, err
    # AlwaysOn#stop bounds the sinks' stop (AlwaysOn::Sinks::STOP_TIMEOUT, 5 s): the
    # program cannot take more than its work, boot and that bound. A guard
    # against a hang, not a timing assertion: 60 s is far from any real run.
    assert_operator took, :<, 60
    assert_empty Dir.children(@cwd)
  end
end
