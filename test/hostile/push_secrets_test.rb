# frozen_string_literal: true

require "test_helper"
require "stringio"
require "fathom/push/push"
require "support/hostile_server"
require "support/secret_fragments"

# Credentials and control characters that a push receiver, or the
# FATHOM_PUSH value itself, would put into Fathom's messages (issue 40,
# items 2, 3 and 14).
class PushSecretsTest < Minitest::Test
  include SecretFragments

  TOKEN = "tok_SECRET_0123456789abcdef"
  USER = "me"
  PASSWORD = "pw_SECRET_01234"
  BASIC = ["#{USER}:#{PASSWORD}"].pack("m0")

  def setup
    @servers = []
  end

  def teardown
    @servers.each(&:close)
  end

  # A receiver that answers 401 with `padding` dots, then what it was sent
  # (the Authorization header, and its basic-auth value decoded): the echo
  # falls across every place a message could be cut.
  def echoing(padding)
    server = HostileServer.new do |req, io|
      auth = req.headers["authorization"].to_s
      decoded = auth.start_with?("Basic ") ? auth.delete_prefix("Basic ").unpack1("m") : ""
      body = "#{"." * padding}you sent Authorization: #{auth} (#{decoded}) #{"." * 300}"
      io.write("HTTP/1.1 401 Unauthorized\r\nContent-Length: #{body.bytesize}\r\nConnection: close\r\n\r\n#{body}")
    end
    @servers << server
    server
  end

  # [last_error, the stop line] of one push that the server refuses.
  def refused_push(url, **auth)
    client = Fathom::Push::Client.new(url: url, service: "secrets", retries: 0, timeout: 10, **auth).start
    client.deliver(Fathom::Profile.new("pprof".b, {}, kind: :cpu), mode: :cpu, from_ns: 0, until_ns: 1)
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 30
    sleep 0.01 until client.stats[:failed] == 1 || Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline
    err = StringIO.new
    old = $stderr
    $stderr = err
    begin
      stats = client.stop(timeout: 5)
    ensure
      $stderr = old
    end
    assert_equal 1, stats[:failed], stats.inspect
    [stats[:last_error].to_s, err.string]
  end

  def test_an_echoed_token_is_never_printed_whole_or_in_part
    (0..240).step(11) do |padding|
      server = echoing(padding)
      error, line = refused_push(server.url("pyroscope"), token: TOKEN)
      assert_match(/HTTP 401/, error)
      assert_includes error, "Bearer [redacted]", "padding #{padding}" if padding < 120
      refute_fragments(error, [TOKEN], "last_error (padding #{padding})")
      refute_fragments(line, [TOKEN], "the stop line (padding #{padding})")
    end
  end

  def test_echoed_basic_auth_is_never_printed_encoded_or_decoded
    (0..240).step(13) do |padding|
      server = echoing(padding)
      [{ user: USER, password: PASSWORD }, {}].each do |auth|
        url = auth.empty? ? "pyroscope://#{USER}:#{PASSWORD}@127.0.0.1:#{server.port}" : server.url("pyroscope")
        error, line = refused_push(url, **auth)
        refute_fragments(error + line, [PASSWORD, BASIC], "padding #{padding}, #{auth.empty? ? "URL" : "options"}")
      end
    end
  end

  # A password with a reserved character, unescaped, is refused (as curl
  # refuses it) and the message shows none of it; escaped, it is used.
  def test_a_url_password_with_reserved_characters_is_never_half_printed
    ["hunter2/SECRETPART", "hunter2@SECRETPART", "hunter2#SECRETPART", "hunter2?SECRETPART",
     "hunter2:SECRETPART", "hunter2 SECRETPART", "hunter2/SE@CR#ET?PA:RT"].each do |password|
      ["pyroscope://alice:#{password}@127.0.0.1:4040", "pyroscope://alice:#{password}@127.0.0.1:4040/prefix",
       "nonsense alice:#{password}@h", "pyroscope://alice:#{password}@h:99999"].each do |url|
        shown = begin
          client = Fathom::Push.from_env("FATHOM_PUSH" => url)
          [client.inspect, client.stats.inspect, client.endpoint.inspect].join(" ")
        rescue ArgumentError => e
          e.message
        end
        refute_fragments(shown, [password, "SECRETPART", "hunter2"], url)
      end
    end
    escaped = Fathom::Push.from_env("FATHOM_PUSH" => "pyroscope://alice:hunter2%2FSE%40CR%23ET%3FPA:RT@127.0.0.1:4040")
    assert_equal "hunter2/SE@CR#ET?PA:RT", escaped.endpoint.password
    refute_fragments(escaped.inspect + escaped.stats.inspect, ["hunter2"], "a client with an escaped password")
    error = assert_raises(ArgumentError) { Fathom::Push.from_env("FATHOM_PUSH" => "pyroscope://alice:hunter2/SECRETPART@h") }
    assert_match(%r{percent-encode / \? # @ in a password \(%2F}, error.message)
  end

  # CR LF in the host (or anywhere in the URL) never reaches a log line
  # raw: the value is refused, shown escaped, and stats[:endpoint] is
  # clean whatever the endpoint holds.
  def test_control_characters_in_fathom_push_never_reach_a_line_raw
    ["pyroscope://127.0.0.1\r\nfathom: injected:4040", "pyroscope://127.0.0.1:4040/pre\r\nfathom: injected",
     "pyroscope://a\tb:4040", "pyroscope://h\e[31m:4040", "pyroscope://al\nice:pw@h:4040"].each do |url|
      error = assert_raises(ArgumentError) { Fathom::Push.from_env("FATHOM_PUSH" => url) }
      refute_match(/[\r\n\t\e]/, error.message, url.inspect)
      assert_match(/fathom: FATHOM_PUSH must be a URL/, error.message)
    end
    client = Fathom::Push::Client.new(url: "pyroscope://127.0.0.1:1", service: "s")
    assert_equal "http://127.0.0.1:1/push.v1.PusherService/Push", client.stats[:endpoint]
  end

  # The same in a process: fathom/setup's line for a bad FATHOM_PUSH, and
  # its "profiling into" line for a FATHOM_DIR whose name has CR LF, are
  # one line each, with the control characters escaped.
  def test_setup_lines_stay_one_line
    require_native!
    Dir.mktmpdir("fathom-crlf") do |base|
      dir = File.join(base, "d\r\nfathom: injected")
      env = TestHelper::PLAIN_ENV.merge("FATHOM_DIR" => dir, "FATHOM_MODE" => "gc", "FATHOM_EVERY" => "3600s",
                                        "FATHOM_PUSH" => "pyroscope://127.0.0.1\r\nfathom: injected:4040")
      _out, err, status = Open3.capture3(env, RbConfig.ruby, "-I#{TestHelper::LIB}", "-rfathom/setup", "-e", "nil")
      assert status.success?, err
      assert_equal 1, err.lines.size, err
      assert_match(/\Afathom\/setup: not profiling: ArgumentError: fathom: FATHOM_PUSH must be a URL/, err)
      _out, err, status = Open3.capture3(env.merge("FATHOM_PUSH" => nil), RbConfig.ruby, "-I#{TestHelper::LIB}",
                                         "-rfathom/setup", "-e", "nil")
      assert status.success?, err
      refute(err.lines.any? { |l| l.start_with?("fathom: injected") }, err)
      assert_includes err, "d\\x0d\\x0afathom: injected"
    end
  end
end
