# frozen_string_literal: true

require "socket"
require "support/child_watch"

# Issue 40, item 5, the acceptance against a real puma: puma SIGKILLed
# during a /retention fetch left the snapshot's child orphaned, holding
# puma's listening socket, and the restarted puma died with EADDRINUSE; a
# connection the app closed saw its end only when the child exited (up to
# fork_timeout, 300 s). Included by the tests that run it on Debian's puma
# 5.6.5 (test/hostile/killed_during_snapshot_test.rb, the issue's setup)
# and on the Rails app's puma 6 (test/rails/killed_during_snapshot_test.rb).
#
# The snapshot's child is stopped (SIGSTOP) once it is under way: a child
# at nice 19 on a busy machine, as slow as can be, and the kill is certain
# to land during the snapshot whatever this machine's speed. Only the
# kernel's PR_SET_PDEATHSIG SIGKILL can end it then.
module KilledDuringSnapshot
  include ChildWatch

  # The servers the test started (@server, @restarted) are stopped, and a
  # child left stopped (a failed check) is killed.
  def teardown
    [@server, @restarted].each { |server| server&.stop }
    Process.kill(:KILL, @child) if @child && !gone?(@child)
  end

  # One HTTP/1.1 reply read off `conn` (headers, then content-length bytes).
  def read_reply(conn)
    head = +""
    head << conn.readpartial(4096) until head.include?("\r\n\r\n")
    headers, body = head.split("\r\n\r\n", 2)
    length = headers[/^content-length:\s*(\d+)/i, 1].to_i
    body << conn.readpartial(4096) while body.bytesize < length
    headers
  end

  # Whether `conn` reaches end of file within `seconds` (whatever it reads
  # before: the reply to its last request).
  def eof_within?(conn, seconds)
    deadline = monotonic + seconds
    loop do
      left = deadline - monotonic
      return false if left <= 0 || !IO.select([conn], nil, nil, left)
      return true if conn.read_nonblock(4096, exception: false).nil?
    end
  rescue Errno::ECONNRESET
    true
  end

  # Seconds until a listener could be bound on `port`, nil past `bound`.
  def seconds_to_bind(port, since, bound)
    loop do
      TCPServer.new("127.0.0.1", port).close
      return monotonic - since
    rescue Errno::EADDRINUSE
      return nil if monotonic - since > bound

      sleep 0.005
    end
  end

  # `server` (pid, port, get) serves the endpoints at /debug/fathom and a
  # small page at `page`. SIGKILLs it during a snapshot (and reaps it),
  # then checks its port, its client's connection and its child; the
  # caller then starts a new server on the port.
  def assert_killed_during_a_snapshot_leaves_nothing_behind(server, page:)
    port = server.port
    # A client whose connection the app accepted before the fork (keep-alive).
    conn = TCPSocket.new("127.0.0.1", port)
    conn.write("GET #{page} HTTP/1.1\r\nHost: localhost\r\n\r\n")
    assert_match(%r{\AHTTP/1.1 200}, read_reply(conn))

    5.times do
      fetch = Thread.new { server.get("/debug/fathom/retention", timeout: 600) rescue $! } # rubocop:disable Style/RescueModifier -- the server dies under it
      @child = await_child(server.pid) { fetch.alive? }
      break if @child && stop_when_settled(@child, SNAPSHOT_FDS)

      fetch.join # a child too quick to be seen: fetch again
    end
    assert @child && stopped?(@child), "no snapshot child of puma could be held at work"

    # The app answers and closes the connection: its client sees the end now.
    conn.write("GET #{page} HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n")
    assert eof_within?(conn, 2), "a connection the app closed saw no end of file within 2 s"

    Process.kill(:KILL, server.pid)
    Process.wait(server.pid)
    killed = monotonic
    rebound = seconds_to_bind(port, killed, 10)
    lived = time_until(10) { killed?(@child) }
    refute_nil rebound, "port #{port} could not be bound within 10 s of puma's death"
    refute_nil lived, "the snapshot's child was not killed within 10 s of puma's death"
    assert_operator rebound, :<, 1.0, "the port was bound again #{rebound.round(3)} s after puma's death"
    assert_operator lived, :<, 1.0, "the orphan was killed #{lived.round(3)} s after puma's death"
    if ENV["FATHOM_TEST_VERBOSE"]
      gone = time_until(120) { gone?(@child) }
      puts "\n  port re-bound #{(rebound * 1000).round(1)} ms after puma was reaped; the orphan was killed " \
           "#{(lived * 1000).round(1)} ms after, gone after #{gone ? "#{(gone * 1000).round(1)} ms" : "more than 120 s"}"
    end
  ensure
    conn&.close
  end
end
