# frozen_string_literal: true

require "test_helper"
require "support/hostile_server"
require "fathom/always_on/sinks"

# A push receiver that answers with an 800 MB error body (issue 40, item
# 10): the client reads at most Push::Transport::BODY_LIMIT of it, so the
# app's memory and its exit time are what they are with the receiver
# down. Before: 1,040 MB RSS (125 MB with the receiver down) and an exit
# 5.8-6.9 s after the program's end, past the 5 s stop bound.
class PushBoundedReadTest < Minitest::Test
  BODY = 800 << 20
  # The program: 1.5 s of life under fathom/setup (a flush every 500 ms,
  # each pushed), then the time its own at_exit ran, which is before
  # fathom/setup's (at_exit handlers run last-registered first).
  PROGRAM = 'at_exit { $stderr.puts "program-end #{Process.clock_gettime(Process::CLOCK_MONOTONIC)}" }; sleep 1.5'

  def setup
    require_native!
  end

  # [peak RSS in MB (VmHWM, read until the process is gone), seconds from
  # the program's end to the process's exit, stderr].
  def run_program(url)
    env = TestHelper::PLAIN_ENV.merge("RUBYOPT" => "-I#{TestHelper::LIB} -rfathom/setup", "FATHOM_MODE" => "gc",
                                      "FATHOM_EVERY" => "500ms", "FATHOM_PUSH" => url)
    Dir.mktmpdir("fathom-push-rss") do |dir|
      err_path = File.join(dir, "err")
      pid = Process.spawn(env, RbConfig.ruby, "-e", PROGRAM, err: err_path, chdir: dir)
      hwm = 0
      until Process.wait(pid, Process::WNOHANG)
        status = File.read("/proc/#{pid}/status") rescue "" # rubocop:disable Style/RescueModifier -- gone meanwhile
        kb = status[/^VmHWM:\s+(\d+) kB/, 1].to_i
        hwm = kb if kb > hwm
        sleep 0.02
      end
      ended = Process.clock_gettime(Process::CLOCK_MONOTONIC)
      err = File.read(err_path)
      stamp = err[/^program-end ([\d.]+)/, 1] or flunk("the program did not finish: #{err}")
      [hwm / 1024.0, ended - Float(stamp), err]
    end
  end

  def test_an_800_mb_error_body_costs_neither_memory_nor_exit_time
    sent = Queue.new
    huge = HostileServer.new do |_req, io|
      io.write("HTTP/1.1 500 Internal Server Error\r\nContent-Type: text/plain\r\nContent-Length: #{BODY}\r\n\r\n")
      sent << HostileServer.stream(io, BODY)
    end
    down = TCPServer.open("127.0.0.1", 0) { |s| s.addr[1] } # closed: connection refused

    base_rss, base_exit, = run_program("pyroscope://127.0.0.1:#{down}")
    rss, exit_s, err = run_program(huge.url("pyroscope"))
    attempts = huge.requests.size
    written = Array.new(sent.size) { sent.pop }
    puts format("\npush with an 800 MB error body: peak RSS %.0f MB (receiver down: %.0f MB), exit %.2f s after " \
                "the program's end (receiver down: %.2f s), %d attempts, at most %d bytes of a reply written",
                rss, base_rss, exit_s, base_exit, attempts, written.max.to_i)
    assert_operator attempts, :>=, 1, err
    assert_match(/HTTP 500 from/, err, "the stop line says what the receiver answered")
    # What the client read: at most BODY_LIMIT plus what the kernel's
    # socket buffers took before it closed (a few MB at most); a whole
    # body is 800 MB.
    assert_operator written.max.to_i, :<, 64 << 20, "the client stopped reading"
    # Peak RSS: the same as with the receiver down, within what one run
    # differs from another (a few MB); before, 900 MB more.
    assert_operator rss - base_rss, :<, 64, "peak RSS #{rss.round} MB against #{base_rss.round} MB"
    # Exit: within AlwaysOn::Sinks::STOP_TIMEOUT (5 s) of the program's end, as with
    # the receiver down (the sender retries until the deadline either way;
    # measured 4.95 s against 4.68 s, and 5.35-6.9 s before); 1 s for the
    # rest (the last flush, the process's own end). On a machine so busy
    # that the receiver-down run itself took longer, that run is the bound.
    bound = [base_exit, Fathom::AlwaysOn::Sinks::STOP_TIMEOUT].max + 1.0
    assert_operator exit_s, :<, bound, err
  ensure
    huge&.close
  end
end
