# frozen_string_literal: true

require "test_helper"
require "support/hostile_server"
require "support/secret_fragments"

# `fathom leaks URL` against servers that echo what they were sent or never
# stop talking: it fetches as `fathom dump` does (test/hostile/dump_fetch_test.rb).
class LeaksFetchTest < Minitest::Test
  include SecretFragments

  PASSWORD = "pw_SECRET_0123"

  def setup
    @servers = []
  end

  def teardown
    @servers.each(&:close)
  end

  def server(&block)
    HostileServer.new(&block).tap { |s| @servers << s }
  end

  def leaks(*args, env: { "FATHOM_RACK_TOKEN" => nil }, every: "10ms", span: "10ms")
    TestHelper.run_fathom("leaks", *args, "--every", every, "--for", span, env: env)
  end

  # What the "app" keeps between two fetches of its heap.
  KEEP = []

  # Fathom's own endpoints (an exact heap profiler, Rack::App) behind the
  # one-request-per-connection server, and an app that keeps 300 strings of
  # 1 kB between two fetches: `fathom leaks URL` finds the leak and, from
  # the server's retention snapshot (/leaks?holders=), what holds it, and
  # stops fetching once the leak is confident, long before --for ends.
  def test_a_leak_on_a_live_server_is_found_and_fetching_stops_early
    require_native!
    require "fathom/rack"
    profiler = Fathom::HeapProfiler.new(exact: true).start
    app = Fathom::Rack::App.new(enabled: true, heap: profiler)
    fetches = 0
    live = server do |req, io|
      path, query = req.line.split[1].split("?", 2)
      if path.end_with?("/heap")
        fetches += 1
        300.times { KEEP << ("y" * 1000) } # site: the leak
        # A major GC now and then, as an app has: a leak must have grown
        # across one (Leaks::Trend), or it may be the old generation's dead.
        GC.start if (fetches % 4).zero?
      end
      env = { "REQUEST_METHOD" => "GET", "SCRIPT_NAME" => "", "PATH_INFO" => path, "QUERY_STRING" => query.to_s,
              "REMOTE_ADDR" => "127.0.0.1", "SERVER_PROTOCOL" => "HTTP/1.1", "HTTP_HOST" => req.headers["host"].to_s }
      status, headers, body = app.call(env)
      payload = +"".b
      body.each { |part| payload << part.b }
      body.close if body.respond_to?(:close)
      head = headers.reject { |k, _| k.casecmp?("content-length") }.map { |k, v| "#{k}: #{v}\r\n" }.join
      io.write("HTTP/1.1 #{status} X\r\n#{head}Content-Length: #{payload.bytesize}\r\n\r\n")
      io.write(payload)
    end
    leak_line = File.readlines(__FILE__).index { |l| l.include?("# site: the leak") } + 1
    out, err, status = leaks(live.url + "/debug/fathom", every: "20ms", span: "4s")
    assert_equal 3, status.exitstatus, out + err
    assert_match(/^LEAK  \S*leaks_fetch_test\.rb:#{leak_line} \(String\) .* held by LeaksFetchTest::KEEP \(Array\)/, out)
    assert_operator fetches, :<=, 20, "fetching went on towards --for's 200 windows:\n#{out}"
  ensure
    profiler&.stop
    KEEP.clear
  end

  # user:password@ is sent as basic auth and never shown, not even when
  # the server echoes it back; a token the same.
  def test_url_credentials_are_sent_as_basic_auth_and_never_echoed
    basic = ["admin:#{PASSWORD}"].pack("m0")
    echo = server do |req, io|
      body = "fathom: you sent #{req.headers["authorization"]} #{req.headers["authorization"].to_s.delete_prefix("Basic ").unpack1("m")}"
      io.write("HTTP/1.1 401 Unauthorized\r\nContent-Length: #{body.bytesize}\r\n\r\n#{body}")
    end
    out, err, status = leaks("http://admin:#{PASSWORD}@127.0.0.1:#{echo.port}/debug/fathom")
    assert_equal 1, status.exitstatus, out + err
    request = echo.requests.pop
    assert_equal "Basic #{basic}", request.headers["authorization"]
    assert_match(%r{\AGET /debug/fathom/heap HTTP/1\.1\z}, request.line)
    assert_match(%r{fathom leaks: http://127\.0\.0\.1:\d+/debug/fathom: HTTP 401: you sent Basic \[redacted\]}, err)
    refute_fragments(out + err, [PASSWORD, basic], "fathom leaks' output")

    token = "tok_SECRET_0123456789abcdef"
    out, err, status = leaks("http://127.0.0.1:#{echo.port}/debug/fathom", "--token", token)
    assert_equal 1, status.exitstatus
    assert_equal "Bearer #{token}", echo.requests.pop.headers["authorization"]
    assert_match(/you sent Bearer \[redacted\]/, err)
    refute_fragments(out + err, [token], "fathom leaks' output with --token")

    _o, err, status = leaks("http://admin:#{PASSWORD}@127.0.0.1:#{echo.port}/debug/fathom", "--token", token)
    assert_equal 2, status.exitstatus # a usage error
    assert_match(/a token .* or user:password@ in URL, not both/, err)
    refute_fragments(err, [PASSWORD, token], "the usage error")

    # A refused connection's message names the URL without its userinfo.
    closed = TCPServer.open("127.0.0.1", 0) { |s| s.addr[1] }
    _o, err, status = leaks("http://admin:#{PASSWORD}@127.0.0.1:#{closed}/debug/fathom")
    assert_equal 1, status.exitstatus
    assert_match(/cannot fetch it/, err)
    refute_fragments(err, [PASSWORD], "the connection error")
  end

  # A "heap profile" that never ends, and an error whose body never ends:
  # each read up to its bound, then the connection is dropped.
  def test_a_reply_that_never_ends_is_not_read_to_its_end
    [["200 OK", /the reply is over 64 MB: not what heap serves/], ["500 Internal Server Error", /HTTP 500: no heap today/]].each do |line, said|
      written = Queue.new
      endless = server do |_req, io|
        io.write("HTTP/1.1 #{line}\r\nContent-Length: #{2 << 30}\r\n\r\nfathom: no heap today\n")
        written << HostileServer.stream(io, 2 << 30)
      end
      _o, err, status = leaks(endless.url + "/debug/fathom")
      bytes = written.pop
      assert_equal 1, status.exitstatus, err
      assert_match(said, err)
      # The bound (64 MB, or the 16 kB of an error) plus the sockets' buffers.
      assert_operator bytes, :<, 96 << 20, line
    end
  end
end
