# frozen_string_literal: true

require "test_helper"
require "support/env_vars"
require "fathom/rack"
require "timeout"
require "socket"
require "tmpdir"

# Each rule of Fathom::Rack::Guard, through the app as a server calls it
# (a Rack env Hash: the rack gem is not needed, and REMOTE_ADDR is ours to
# set, as a proxy or a remote client would make it).
class RackSecurityTest < Minitest::Test
  include EnvVars

  TOKEN = "s3cret-token-0123456789abcdef"

  def env(path, query: "", addr: "127.0.0.1", headers: {}, method: "GET")
    { "REQUEST_METHOD" => method, "SCRIPT_NAME" => "", "PATH_INFO" => path, "QUERY_STRING" => query,
      "REMOTE_ADDR" => addr, "SERVER_PROTOCOL" => "HTTP/1.1" }.merge(headers)
  end

  def call(app, path, **opts)
    status, headers, body = app.call(env(path, **opts))
    [status, headers, body.each.to_a.join]
  end

  def app(**opts)
    Fathom::Rack::App.new(enabled: true, token: nil, **opts)
  end

  def test_disabled_unless_configured
    status, = call(Fathom::Rack::App.new(enabled: false), "/debug/fathom/heap")
    assert_equal 404, status
    # As middleware, a disabled app is not there at all.
    inner = ->(_env) { [200, {}, ["page"]] }
    status, _, body = Fathom::Rack::App.new(inner, enabled: false).call(env("/debug/fathom/heap"))
    assert_equal [200, ["page"]], [status, body]
  end

  def test_enabled_from_the_environment_only_with_fathom_rack_1
    old = ENV["FATHOM_RACK"]
    ENV["FATHOM_RACK"] = "1"
    assert Fathom::Rack::App.new.config.enabled?
    ENV["FATHOM_RACK"] = "yes please"
    refute Fathom::Rack::App.new.config.enabled?
  ensure
    ENV["FATHOM_RACK"] = old
  end

  def test_non_loopback_without_token_is_refused
    %w[10.1.2.3 192.168.0.7 8.8.8.8 2001:db8::1 ::ffff:10.0.0.1 garbage].each do |addr|
      status, _, body = call(app, "/debug/fathom/", addr: addr)
      assert_equal 403, status, addr
      assert_match(/loopback clients only/, body)
    end
    %w[127.0.0.1 127.8.9.10 ::1 ::ffff:127.0.0.1].each do |addr|
      assert_equal 200, call(app, "/debug/fathom/", addr: addr).first, addr
    end
  end

  def test_a_forwarded_request_is_not_loopback
    # A reverse proxy on the same host connects from 127.0.0.1 for everyone.
    %w[HTTP_X_FORWARDED_FOR HTTP_FORWARDED HTTP_X_REAL_IP].each do |h|
      status, = call(app, "/debug/fathom/", headers: { h => "203.0.113.9" })
      assert_equal 403, status, h
    end
  end

  # Proxies and CDNs that name the client in headers of their own, and
  # servers that report a unix-socket client as 127.0.0.1 (puma, unicorn):
  # behind any of them every client would be "loopback".
  def test_every_client_address_header_a_unix_socket_and_http_1_0_are_not_loopback
    %w[HTTP_X_CLIENT_IP HTTP_TRUE_CLIENT_IP HTTP_CF_CONNECTING_IP HTTP_X_CLUSTER_CLIENT_IP
       HTTP_FASTLY_CLIENT_IP HTTP_X_FORWARDED_FOR HTTP_VIA HTTP_X_FORWARDED_PROTO HTTP_X_FORWARDED_HOST].each do |h|
      ["203.0.113.9", "127.0.0.1", ""].each do |value|
        status, _, body = call(app, "/debug/fathom/", headers: { h => value })
        assert_equal 403, status, "#{h}: #{value.inspect}"
        assert_match(/not through a proxy/, body)
      end
    end
    # nginx's default proxy_pass: HTTP/1.0 to the upstream, no forwarding
    # header. Each server's keys (Fathom::Rack::RequestVersion;
    # test/hostile/proxy_guard_test.rb runs the real ones).
    {
      { "SERVER_PROTOCOL" => "HTTP/1.0" } => 403, # puma 6, unicorn...
      { "SERVER_PROTOCOL" => "HTTP/1.1", "HTTP_VERSION" => "HTTP/1.0" } => 403, # puma 5: its SERVER_PROTOCOL is a constant
      { "SERVER_PROTOCOL" => "HTTP/1.1", "HTTP_VERSION" => "HTTP/1.0, HTTP/1.1" } => 403, # puma 5 + a client's Version:
      { "SERVER_PROTOCOL" => "HTTP/1.0", "HTTP_VERSION" => "HTTP/1.1" } => 403, # puma 7: Version: is the client's
      { "SERVER_PROTOCOL" => nil } => 403, # not reported: cannot be told
      { "SERVER_PROTOCOL" => "HTTP/1.1", "HTTP_VERSION" => "HTTP/1.1, \xFF" } => 403, # a client's bytes: 403, not 500
      { "SERVER_PROTOCOL" => "HTTP/1.1", "SERVER_SOFTWARE" => "WEBrick/1.8.1 (Ruby/3.1.2/2022-04-12)" } => 403,
      { "SERVER_PROTOCOL" => "HTTP/1.1" } => 200,
      { "SERVER_PROTOCOL" => "HTTP/1.1", "HTTP_VERSION" => "HTTP/1.1" } => 200,
      { "SERVER_PROTOCOL" => "HTTP/2" } => 200
    }.each do |headers, expected|
      status, _, body = app.call(env("/debug/fathom/").merge(headers).compact) # nil: the key removed
      assert_equal expected, status, headers.inspect
      body = body.each.to_a.join
      assert_match(/this request: (it came as |the server did not report|WEBrick)/, body) if expected == 403
    end
    # A unix socket: no address, a path, or puma's 127.0.0.1 with the socket in the env.
    ["", "unix:/run/app.sock", "unix"].each do |addr|
      assert_equal 403, call(app, "/debug/fathom/", addr: addr).first, addr
    end
    assert_equal 403, app.call(env("/debug/fathom/").tap { |e| e.delete("REMOTE_ADDR") }).first
    Dir.mktmpdir do |dir|
      server = UNIXServer.new(File.join(dir, "s"))
      client = UNIXSocket.new(File.join(dir, "s"))
      %w[puma.socket unicorn.socket].each do |key|
        assert_equal 403, call(app, "/debug/fathom/", headers: { key => client }).first, key
      end
      tcp = TCPServer.new("127.0.0.1", 0)
      tcp_client = TCPSocket.new("127.0.0.1", tcp.addr[1])
      assert_equal 200, call(app, "/debug/fathom/", headers: { "puma.socket" => tcp_client }).first
    ensure
      [server, client, tcp, tcp_client].each { |io| io&.close }
    end
    # With a token, a proxied request is served (the token is what protects).
    status, = call(app(token: TOKEN), "/debug/fathom/", addr: "",
                                                         headers: { "HTTP_X_CLIENT_IP" => "203.0.113.9", "HTTP_AUTHORIZATION" => "Bearer #{TOKEN}" })
    assert_equal 200, status
  end

  # DNS rebinding: a page on evil.example, whose name the attacker then
  # points at 127.0.0.1, makes the browser a loopback client; it still
  # sends Host: evil.example.
  def test_a_foreign_host_is_refused_without_a_token
    ["evil.example", "evil.example:9292", "localhost.evil.example", "127.0.0.1.nip.io", "[::1].evil", "",
     "a b", "localhost:80:80", "user@localhost", "0.0.0.0", "10.0.0.1"].each do |host|
      status, _, body = call(app, "/debug/fathom/", headers: { "HTTP_HOST" => host })
      assert_equal 403, status, host.inspect
      assert_match(/is not a local name/, body) if host == "evil.example"
    end
    ["localhost", "LocalHost:9292", "127.0.0.1", "127.0.0.1:3000", "[::1]", "[::1]:8080", "127.1.2.3:1"].each do |host|
      assert_equal 200, call(app, "/debug/fathom/", headers: { "HTTP_HOST" => host }).first, host
    end
    # The per-request middleware follows the same rule.
    mw = Fathom::Rack::Middleware.new(->(_) { [200, {}, ["page"]] }, enabled: true, token: nil)
    status, _, body = mw.call(env("/", query: "fathom=heap", headers: { "HTTP_HOST" => "rebind.attacker.example" }))
    assert_equal [403, true], [status, body.join.include?("not a local name")]
    # The server's own names, from hosts: or FATHOM_RACK_HOSTS.
    named = app(hosts: ["profiler.internal", "[fd00::1]"])
    assert_equal 200, call(named, "/debug/fathom/", headers: { "HTTP_HOST" => "Profiler.Internal:8080" }).first
    assert_equal 200, call(named, "/debug/fathom/", headers: { "HTTP_HOST" => "[fd00::1]:80" }).first
    assert_equal 403, call(named, "/debug/fathom/", headers: { "HTTP_HOST" => "other.internal" }).first
    with_env("FATHOM_RACK_HOSTS" => "a.internal, b.internal") do
      from_env = app
      assert_equal %w[a.internal b.internal], from_env.config.hosts
      assert_equal 200, call(from_env, "/debug/fathom/", headers: { "HTTP_HOST" => "b.internal" }).first
    end
    # With a token, any name is served (servers are reached by many names).
    status, = call(app(token: TOKEN), "/debug/fathom/", addr: "10.0.0.5",
                                                        headers: { "HTTP_HOST" => "shop.example", "HTTP_AUTHORIZATION" => "Bearer #{TOKEN}" })
    assert_equal 200, status
  end

  def test_bad_hosts_are_refused_at_configuration
    assert_raises(ArgumentError) { app(hosts: ["http://x.example"]) }
    assert_raises(ArgumentError) { app(hosts: "x.example:80") }
    assert_raises(ArgumentError) { app(hosts: ["a/b"]) }
    assert_raises(TypeError) { app(hosts: [1]) }
    assert_raises(TypeError) { app(hosts: :x) }
    assert_equal ["x.example"], app(hosts: " X.example ,,").config.hosts
  end

  def test_wrong_or_missing_token_is_refused
    secured = app(token: TOKEN)
    [nil, "Bearer wrong", "Bearer #{TOKEN}x", "Bearer #{TOKEN[0..-2]}", "Basic #{TOKEN}", TOKEN].each do |auth|
      headers = auth ? { "HTTP_AUTHORIZATION" => auth } : {}
      status, h, body = call(secured, "/debug/fathom/", addr: "10.0.0.5", headers: headers)
      assert_equal 401, status, auth.inspect
      assert_match(/Bearer/, h["www-authenticate"])
      refute_includes body, TOKEN
    end
    # The token is needed from loopback too once one is configured.
    assert_equal 401, call(secured, "/debug/fathom/").first
    status, = call(secured, "/debug/fathom/", addr: "10.0.0.5", headers: { "HTTP_AUTHORIZATION" => "Bearer #{TOKEN}" })
    assert_equal 200, status
  end

  def test_weak_tokens_are_refused_at_configuration
    assert_raises(ArgumentError) { app(token: "short") }
    assert_raises(ArgumentError) { app(token: "has a space in it, long enough") }
    assert_raises(TypeError) { app(token: 12_345) }
    refute_includes app(token: TOKEN).config.inspect, TOKEN
  end

  # rack-timeout raises into the server thread while it waits for the
  # profile thread (here a retention snapshot of 300k objects): the
  # guard and the work lock must stay taken until the profile is done.
  def test_an_exception_in_the_waiting_thread_keeps_the_guard_until_the_profile_ends
    require_native!
    slow = app(max_seconds: 1)
    keep = Array.new(300_000) { Object.new }
    guard = Fathom::Rack::Guard
    server = Thread.new do
      Thread.current.report_on_exception = false
      call(slow, "/debug/fathom/retention", query: "force=1")
    end
    sleep 0.01 until Thread.list.any? { |t| t.name == "fathom-profile" } || !server.alive?
    server.raise(Timeout::Error, "request timed out")
    sleep 0.05
    # A snapshot of 300k objects takes >= 0.15 s (0.6 s per million on a
    # quiet machine, seconds on a loaded one): it still runs here.
    assert(Thread.list.any? { |t| t.name == "fathom-profile" }, "the snapshot ended before the checks")
    assert guard.lock(:retention).locked?, "the guard was released while the profile still ran"
    assert guard.work_lock.locked?, "the work lock was released while the profile thread ran"
    assert_equal 429, call(slow, "/debug/fathom/retention", query: "force=1").first
    # The app turns an unexpected StandardError into its fixed 500.
    outcome = begin
      server.value.first
    rescue Timeout::Error
      :raised
    end
    assert_includes [500, :raised], outcome
    refute guard.lock(:retention).locked?
    refute guard.work_lock.locked?
    refute(Thread.list.any? { |t| t.name == "fathom-profile" })
    keep.clear
    assert_equal 200, call(slow, "/debug/fathom/gc", query: "seconds=1").first
  end

  # One request per kind: a second gc fetch (or ?fathom=gc) gets 429
  # while one runs, but a heap fetch is served meanwhile (a scraper
  # fetches each type on its own schedule), and the timed wait holds no
  # profile thread.
  def test_concurrent_fetches_of_one_kind_get_429_other_kinds_are_served
    require_native!
    heap = Fathom::HeapProfiler.new.start
    slow = app(max_seconds: 2, heap: heap)
    profile_threads = -> { Thread.list.count { |t| t.name == "fathom-profile" } }
    first = Thread.new { call(slow, "/debug/fathom/gc", query: "seconds=2") }
    sleep 0.05 until Fathom::Rack::Guard.lock(:gc).locked? || !first.alive?
    status, headers, body = call(slow, "/debug/fathom/gc", query: "seconds=1")
    assert_equal 429, status
    assert_operator headers["retry-after"].to_i, :>=, 1
    assert_match(/another gc profiling request/, body)
    # The middleware shares the gc lock.
    mw = Fathom::Rack::Middleware.new(->(_) { [200, {}, ["page"]] }, enabled: true)
    assert_equal 429, mw.call(env("/", query: "fathom=gc")).first
    # Another kind is served while the gc request waits out its seconds.
    assert first.alive?
    assert_equal 0, profile_threads.call, "the ?seconds= wait is on the server thread, not a profile thread"
    status, headers, body = call(slow, "/debug/fathom/heap")
    assert_equal 200, status, body
    assert_equal Process.pid.to_s, headers["x-fathom-pid"]
    assert first.alive?, "the heap fetch did not wait for the gc request"
    assert_equal 200, first.value.first
    assert_equal 200, call(slow, "/debug/fathom/gc", query: "seconds=1").first # free again
  ensure
    heap&.stop
  end

  def test_seconds_are_capped
    require_native!
    started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    status, headers, = call(app(max_seconds: 1), "/debug/fathom/gc", query: "seconds=100000")
    assert_equal 200, status
    assert_equal "1", headers["x-fathom-seconds-capped"]
    assert_operator Process.clock_gettime(Process::CLOCK_MONOTONIC) - started, :<, 30 # runaway limit
    # Any number of digits is capped, not refused (test/hostile/rack_production_test.rb).
    status, headers, = call(app(max_seconds: 1), "/debug/fathom/gc", query: "seconds=99999999999999999")
    assert_equal [200, "1"], [status, headers["x-fathom-seconds-capped"]]
    %w[-1 0 1.5 abc].each do |bad|
      status, _, body = call(app, "/debug/fathom/gc", query: "seconds=#{bad}")
      assert_equal 400, status, bad
      assert_match(/seconds must be a positive integer/, body)
    end
  end

  def test_error_bodies_leak_nothing
    secret = "SECRET-#{rand(1 << 30)}"
    ENV["FATHOM_TEST_SECRET"] = secret
    broken = Object.new
    broken.define_singleton_method(:running?) { true }
    broken.define_singleton_method(:flush) { |**| raise "#{secret} at /etc/#{secret}" }
    err = StringIO.new
    old = $stderr
    $stderr = err
    status, headers, body = call(app(heap: broken), "/debug/fathom/heap")
    $stderr = old
    assert_equal 500, status
    assert_equal "text/plain; charset=utf-8", headers["content-type"]
    assert_equal "fathom: internal error (details in the server's log)\n", body
    assert_includes err.string, secret # the server's log has it
    # Refusals say what to do, and nothing of the process.
    [["/debug/fathom/nope", ""], ["/debug/fathom/gc", "seconds=%ZZ"], ["/debug/fathom/heap", "format=firefox"],
     ["/debug/fathom/heap", "x" * 5000]].each do |path, query|
      status, _, body = call(app, path, query: query)
      assert_includes [400, 404, 409], status
      refute_match(/#{secret}|\.rb:\d+|backtrace|PATH=|HOME=/, body)
      assert_operator body.bytesize, :<, 400
    end
    assert_equal 405, call(app, "/debug/fathom/heap", method: "POST").first
  ensure
    $stderr = old if old
    ENV.delete("FATHOM_TEST_SECRET")
  end

  def test_retention_refused_above_the_heap_limit_unless_forced
    require_native!
    small = app(retention_max_objects: 1)
    status, _, body = call(small, "/debug/fathom/retention")
    assert_equal 413, status
    assert_match(/above retention_max_objects \(1\).*force=1/, body)
    status, headers, body = call(small, "/debug/fathom/retention", query: "force=1")
    assert_equal 200, status
    assert_equal "application/octet-stream", headers["content-type"]
    assert_equal "retained_space", Fathom::Pprof.read(body).sample_type_names.last
  end

  def test_heap_without_a_running_profiler_is_409_saying_how
    status, _, body = call(app, "/debug/fathom/heap")
    assert_equal 409, status
    assert_match(/FATHOM_MODE=heap/, body)
  end
end
