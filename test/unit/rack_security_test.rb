# frozen_string_literal: true

require "test_helper"
require "fathom/rack"
require "timeout"

# Each rule of Fathom::Rack::Guard, through the app as a server calls it
# (a Rack env Hash: the rack gem is not needed, and REMOTE_ADDR is ours to
# set, as a proxy or a remote client would make it).
class RackSecurityTest < Minitest::Test
  TOKEN = "s3cret-token-0123456789abcdef"

  def env(path, query: "", addr: "127.0.0.1", headers: {}, method: "GET")
    { "REQUEST_METHOD" => method, "SCRIPT_NAME" => "", "PATH_INFO" => path, "QUERY_STRING" => query,
      "REMOTE_ADDR" => addr }.merge(headers)
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
  # profile thread: the guard must stay taken until the profile is done.
  def test_an_exception_in_the_waiting_thread_keeps_the_guard_until_the_profile_ends
    require_native!
    slow = app(max_seconds: 1)
    server = Thread.new do
      Thread.current.report_on_exception = false
      call(slow, "/debug/fathom/gc", query: "seconds=1")
    end
    sleep 0.02 until Thread.list.any? { |t| t.name == "fathom-profile" } || !server.alive?
    server.raise(Timeout::Error, "request timed out")
    sleep 0.2
    assert Fathom::Rack::Guard::LOCK.locked?, "the guard was released while the profile still ran"
    assert_equal 429, call(slow, "/debug/fathom/gc", query: "seconds=1").first
    # The app turns an unexpected StandardError into its fixed 500.
    outcome = begin
      server.value.first
    rescue Timeout::Error
      :raised
    end
    assert_includes [500, :raised], outcome
    refute Fathom::Rack::Guard::LOCK.locked?
    refute(Thread.list.any? { |t| t.name == "fathom-profile" })
    assert_equal 200, call(slow, "/debug/fathom/gc", query: "seconds=1").first
  end

  def test_concurrent_fetches_get_429_with_retry_after
    require_native!
    slow = app(max_seconds: 2)
    profile_threads = -> { Thread.list.count { |t| t.name == "fathom-profile" } }
    first = Thread.new { call(slow, "/debug/fathom/gc", query: "seconds=2") }
    sleep 0.05 until (Fathom::Rack::Guard::LOCK.locked? && profile_threads.call == 1) || !first.alive?
    status, headers, body = call(slow, "/debug/fathom/gc", query: "seconds=1")
    assert_equal 429, status
    assert_equal 1, profile_threads.call, "a refused request must not start a profile thread (glibc would give it an arena)"
    assert_operator headers["retry-after"].to_i, :>=, 1
    assert_match(/another profiling request/, body)
    # The middleware shares the one lock.
    mw = Fathom::Rack::Middleware.new(->(_) { [200, {}, ["page"]] }, enabled: true)
    assert_equal 429, mw.call(env("/", query: "fathom=gc")).first
    assert_equal 200, first.value.first
    assert_equal 200, call(slow, "/debug/fathom/gc", query: "seconds=1").first # free again
  end

  def test_seconds_are_capped
    require_native!
    started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    status, headers, = call(app(max_seconds: 1), "/debug/fathom/gc", query: "seconds=100000")
    assert_equal 200, status
    assert_equal "1", headers["x-fathom-seconds-capped"]
    assert_operator Process.clock_gettime(Process::CLOCK_MONOTONIC) - started, :<, 30 # runaway limit
    %w[-1 0 1.5 abc 99999999999999999].each do |bad|
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
