# frozen_string_literal: true

require "test_helper"
require "net/http"
require "zlib"
require "support/hostile_server"
require "support/secret_fragments"
require "fathom/cli"

# `fathom dump URL` against servers that lie, cut the reply or echo what
# they were sent (issue 40, items 4, 10 and 11).
class DumpFetchTest < Minitest::Test
  include SecretFragments

  PASSWORD = "pw_SECRET_0123"
  # Gzipped text that does not compress to nothing: its middle is a cut
  # inside the deflate stream, not in a run of zeros.
  PAYLOAD = Zlib.gzip(Array.new(20_000) { |i| %({"address":"0x#{(i * 7919).to_s(16)}","type":"OBJECT"}\n) }.join)

  def setup
    @dir = Dir.mktmpdir("fathom-dump-fetch")
    @out = File.join(@dir, "heap.json.gz")
    @servers = []
  end

  def teardown
    @servers.each(&:close)
    FileUtils.rm_rf(@dir)
  end

  def server(&block)
    HostileServer.new(&block).tap { |s| @servers << s }
  end

  def dump(*args, env: {})
    TestHelper.run_fathom("dump", *args, "-o", @out, env: env)
  end

  def assert_nothing_written
    assert_empty Dir.children(@dir), "no file, no temp file"
  end

  # user:password@ is sent as basic auth, as curl sends it, and never shown:
  # not in the error, not when the server echoes it back.
  def test_url_credentials_are_sent_as_basic_auth_and_never_echoed
    basic = ["admin:#{PASSWORD}"].pack("m0")
    echo = server do |req, io|
      body = "fathom: you sent #{req.headers["authorization"]} #{req.headers["authorization"].to_s.delete_prefix("Basic ").unpack1("m")}"
      io.write("HTTP/1.1 401 Unauthorized\r\nContent-Length: #{body.bytesize}\r\n\r\n#{body}")
    end
    out, err, status = dump("http://admin:#{PASSWORD}@127.0.0.1:#{echo.port}/debug/fathom", env: { "FATHOM_RACK_TOKEN" => nil })
    assert_equal 1, status.exitstatus, out
    request = echo.requests.pop
    assert_equal "Basic #{basic}", request.headers["authorization"]
    assert_match(%r{\AGET /debug/fathom/dump HTTP/1\.1\z}, request.line)
    assert_match(%r{fathom dump: http://127\.0\.0\.1:\d+/debug/fathom/dump: HTTP 401: you sent Basic \[redacted\]}, err)
    refute_fragments(out + err, [PASSWORD, basic], "fathom dump's output")
    # A token, echoed: the same.
    token = "tok_SECRET_0123456789abcdef"
    out, err, status = dump("http://127.0.0.1:#{echo.port}/debug/fathom", "--token", token)
    assert_equal 1, status.exitstatus, out
    assert_equal "Bearer #{token}", echo.requests.pop.headers["authorization"]
    assert_match(/you sent Bearer \[redacted\]/, err)
    refute_fragments(out + err, [token], "fathom dump's output with --token")

    # Percent-encoded reserved characters are decoded; unescaped, the URL
    # is refused without showing any of it.
    _o, _e, status = dump("http://admin:pw%2FSECRET%40x@127.0.0.1:#{echo.port}/debug/fathom", env: { "FATHOM_RACK_TOKEN" => nil })
    assert_equal 1, status.exitstatus
    assert_equal "Basic #{["admin:pw/SECRET@x"].pack("m0")}", echo.requests.pop.headers["authorization"]
    ["pw/SECRET_0123", "pw#SECRET_0123", "pw?SECRET_0123", "pw SECRET_0123", "pw@SECRET_0123"].each do |password|
      out, err, status = dump("http://admin:#{password}@127.0.0.1:#{echo.port}/debug/fathom", env: { "FATHOM_RACK_TOKEN" => nil })
      refute_equal 0, status.exitstatus, password
      refute_fragments(out + err, [password, "SECRET_0123"], password)
    end
    # A refused connection's message names the URL without its userinfo.
    closed = TCPServer.open("127.0.0.1", 0) { |s| s.addr[1] }
    _o, err, status = dump("http://admin:#{PASSWORD}@127.0.0.1:#{closed}/debug/fathom", env: { "FATHOM_RACK_TOKEN" => nil })
    assert_equal 1, status.exitstatus
    assert_match(/cannot fetch it/, err)
    refute_fragments(err, [PASSWORD], "the connection error")
    assert_nothing_written
  end

  def test_a_token_and_url_credentials_together_are_refused
    _o, err, status = dump("http://admin:#{PASSWORD}@127.0.0.1:1/debug/fathom", "--token", "t" * 20)
    assert_equal 2, status.exitstatus
    assert_match(/give a token \(--token\) or user:password@ in URL, not both/, err)
    _o, err, status = dump("http://admin:#{PASSWORD}@127.0.0.1:1/debug/fathom", env: { "FATHOM_RACK_TOKEN" => "t" * 20 })
    assert_equal 2, status.exitstatus
    assert_match(/FATHOM_RACK_TOKEN \(--token '' leaves it out\)/, err)
    refute_fragments(err, [PASSWORD], "the usage error")
  end

  # An 800 MB error body: the first 16 kB are read, then the connection
  # is closed (before: every byte was read, 1 MB of it kept).
  def test_an_800_mb_error_body_is_not_read
    written = Queue.new
    huge = server do |_req, io|
      io.write("HTTP/1.1 500 Internal Server Error\r\nContent-Length: #{800 << 20}\r\n\r\nfathom: no dump today\n")
      written << HostileServer.stream(io, 800 << 20)
    end
    started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    _o, err, status = dump(huge.url + "/debug/fathom")
    took = Process.clock_gettime(Process::CLOCK_MONOTONIC) - started
    bytes = written.pop
    puts format("\nfathom dump, 800 MB error body: %.2f s, the server wrote %.1f MB before the client closed", took, bytes / 1e6)
    assert_equal 1, status.exitstatus
    assert_match(/HTTP 500: no dump today/, err)
    # 16 kB read, plus what the sockets' buffers took (a few MB).
    assert_operator bytes, :<, 64 << 20
    assert_nothing_written
  end

  # A server slower than --timeout is asked once, and the error says it
  # timed out. Net::HTTP resends a GET that timed out by itself: a second
  # heap dump asked of an app still writing the first, which answered 429
  # ("another retention profiling request is running") in place of the
  # timeout. Deterministic: the server takes connections one at a time, in
  # order, so once it has read the request sent after the command ended, it
  # has read every request the command sent.
  def test_a_reply_slower_than_the_timeout_is_asked_for_once
    slow = server do |req, io|
      sleep 3 unless req.line.include?("/after")
      io.write("HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n")
    end
    out, err, status = dump(slow.url + "/debug/fathom/dump", "--timeout", "1")
    assert_equal 1, status.exitstatus, out
    assert_match(/cannot fetch it: .*timed out|Timeout/i, err)
    Net::HTTP.start("127.0.0.1", slow.port, read_timeout: 30) { |http| http.get("/after") }
    lines = Array.new(slow.requests.size) { slow.requests.pop.line }
    assert_equal ["GET /debug/fathom/dump HTTP/1.1", "GET /after HTTP/1.1"], lines
    assert_nothing_written
  end

  # A close-delimited reply (no Content-Length) cut in the middle of its
  # gzip stream, and one shorter than its Content-Length: errors, and no
  # file. Before: "fathom: wrote ..." and exit 0.
  def test_a_cut_reply_is_an_error_and_leaves_no_file
    half = PAYLOAD.byteslice(0, PAYLOAD.bytesize / 2)
    close_delimited = server do |_req, io|
      io.write("HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nConnection: close\r\n\r\n#{half}")
    end
    out, err, status = dump(close_delimited.url + "/debug/fathom")
    assert_equal 1, status.exitstatus, out
    refute_match(/wrote/, out)
    assert_match(/the reply ended before its gzip stream did, after #{half.bytesize} bytes/, err)
    assert_nothing_written

    short = server do |_req, io|
      io.write("HTTP/1.1 200 OK\r\nContent-Length: #{PAYLOAD.bytesize}\r\nConnection: close\r\n\r\n#{half}")
    end
    out, err, status = dump(short.url + "/debug/fathom")
    assert_equal 1, status.exitstatus, out
    assert_match(/the reply ended after #{half.bytesize} of its #{PAYLOAD.bytesize} bytes/, err)
    assert_nothing_written

    whole = server do |_req, io|
      io.write("HTTP/1.1 200 OK\r\nConnection: close\r\n\r\n#{PAYLOAD}#{Zlib.gzip("second member\n")}")
    end
    out, err, status = dump(whole.url + "/debug/fathom")
    assert status.success?, err
    assert_match(/fathom: wrote /, out)
    assert_equal PAYLOAD.bytesize + Zlib.gzip("second member\n").bytesize, File.size(@out)
  end
end
