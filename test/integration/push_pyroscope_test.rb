# frozen_string_literal: true

require_relative "../test_helper"
require "fathom/push/push"
require "support/push_receiver"
require "support/profile_helpers"
require "socket"
require "timeout"

# Fathom::Push against the loopback receiver (test/support/push_receiver.rb),
# which decodes what it gets with protoc from grafana/pyroscope's message
# definitions. Real profiles of every mode, real HTTP; nothing is timed:
# Timeout.timeout only guards against a hang (a stop that did not stop).
class PushPyroscopeTest < Minitest::Test
  include ProfileHelpers

  def setup
    skip "protoc is not installed (script/setup installs it)" unless TestHelper.tool_available?("protoc") || TestHelper.ci?
    @receivers = []
    @clients = []
  end

  def teardown
    @clients.each { |c| c.stop(timeout: 0) }
    @receivers.each(&:close)
  end

  def receiver(**opts)
    PushReceiver.new(**opts).tap { |r| @receivers << r }
  end

  def client(url, **opts)
    Fathom::Push::Client.new(url: url, service: "push-test", **opts).tap { |c| @clients << c }
  end

  def guarded(seconds = 60, &block)
    Timeout.timeout(seconds, &block)
  end

  def burn(seconds)
    finish = Process.clock_gettime(Process::CLOCK_MONOTONIC) + seconds
    junk = []
    junk << "x" * 100 while Process.clock_gettime(Process::CLOCK_MONOTONIC) < finish && junk.size < 200_000
    junk.size
  end

  # One real profile per mode (cpu and wall cannot run together).
  def profiles_by_mode
    @profiles_by_mode ||= begin
      Fathom::NativeLoader.require!
      three = Fathom.profile(mode: %i[cpu heap gc]) { burn(0.3); GC.start }
      wall = Fathom.profile(mode: :wall) { sleep 0.05 }
      retention = Fathom.profile(mode: :retention) { $push_test_kept = Array.new(100) { "kept" * 10 } }
      three.merge(wall: wall, retention: retention)
    end
  end

  NAMES = { cpu: "process_cpu", wall: "wall", heap: "memory", gc: "fathom_gc", retention: "fathom_retention" }.freeze

  def test_every_mode_is_pushed_with_its_labels_and_a_profile_pprof_reads
    skip "go is not installed" unless PprofRaw.go_available? || TestHelper.ci?
    server = receiver
    push = client(server.url, labels: { "region" => "eu" }, token: "tok-123", tenant: "team-a")
    push.start
    t0 = Process.clock_gettime(Process::CLOCK_REALTIME, :nanosecond)
    profiles_by_mode.each { |mode, profile| assert push.deliver(profile, mode: mode, from_ns: t0 - 60_000_000_000, until_ns: t0) }
    stats = guarded { push.stop(timeout: 30) }
    assert_equal 5, stats[:sent], stats.inspect
    assert_equal [0, 0, 0], stats.values_at(:dropped, :failed, :queued)

    requests = server.requests
    assert_equal 5, requests.size
    requests.each do |request|
      assert_equal "POST", request.method
      assert_equal "/push.v1.PusherService/Push", request.path
      assert_equal "application/proto", request.headers["content-type"]
      assert_equal "1", request.headers["connect-protocol-version"]
      assert_equal "Bearer tok-123", request.headers["authorization"]
      assert_equal "team-a", request.headers["x-scope-orgid"]
    end
    by_name = requests.map { |r| PushReceiver.decode(r) }.each { |s| assert_equal 1, s.size }.map(&:first)
                      .to_h { |series| [series.label("__name__"), series] }
    assert_equal NAMES.values.sort, by_name.keys.sort
    NAMES.each do |mode, name|
      series = by_name.fetch(name)
      assert_equal "false", series.label("__delta__"), name
      assert_equal "push-test", series.label("service_name")
      assert_equal Socket.gethostname, series.label("hostname")
      assert_equal Process.pid.to_s, series.label("pid")
      assert_equal RUBY_VERSION, series.label("ruby_version")
      assert_equal "eu", series.label("region")
      names = series.labels.map(&:first)
      assert_equal names.uniq, names, "a duplicate label name makes the server refuse the request"
      assert_equal 1, series.samples.size
      sample = series.samples.first
      assert_match(/\A\h{8}-\h{4}-4\h{3}-[89ab]\h{3}-\h{12}\z/, sample.id)
      assert_equal profiles_by_mode.fetch(mode).bytes, sample.raw_profile, "#{name}: raw_profile is the profile as Fathom wrote it"
      raw = raw_of(Fathom::Profile.new(sample.raw_profile))
      expected_type = { cpu: "cpu", wall: "wall", heap: "alloc_space", gc: "gcs", retention: "inuse_space" }.fetch(mode)
      assert_includes raw.sample_types, expected_type, "#{name}: go tool pprof reads the pushed profile"
    end
  end

  def test_retries_on_5xx_and_429_then_sends_the_same_profile
    server = receiver(statuses: [500, 429, 503])
    push = client(server.url, retries: 3, backoff: 0.01, max_backoff: 0.02).start
    profile = profiles_by_mode.fetch(:cpu)
    push.deliver(profile, mode: :cpu, from_ns: 1, until_ns: 2)
    stats = guarded { push.stop(timeout: 30) }
    assert_equal [1, 0, 3], stats.values_at(:sent, :failed, :retries), stats.inspect
    assert_match(/HTTP 503/, stats[:last_error])
    ids = server.requests.map { |r| PushReceiver.decode(r).first.samples.first.id }
    assert_equal 4, ids.size
    assert_equal 1, ids.uniq.size, "a retry resends the same profile id"
  end

  def test_4xx_is_not_retried
    server = receiver(statuses: [400])
    push = client(server.url, retries: 3, backoff: 0.01).start
    push.deliver(profiles_by_mode.fetch(:heap), mode: :heap, from_ns: 1, until_ns: 2)
    stats = guarded { push.stop(timeout: 30) }
    assert_equal [0, 1, 0], stats.values_at(:sent, :failed, :retries)
    assert_equal 1, server.requests.size
    assert_match(/HTTP 400 .*scripted 400/, stats[:last_error])
  end

  # A port nothing listens on: connection refused at every attempt.
  def closed_port_url
    probe = TCPServer.new("127.0.0.1", 0)
    port = probe.addr[1]
    probe.close
    "pyroscope://127.0.0.1:#{port}"
  end

  def test_server_down_deliver_queues_and_drops_oldest_stop_gives_up
    push = client(closed_port_url, queue: 2, retries: 20, backoff: 0.05, max_backoff: 0.1, token: "s3cret-tok").start
    profile = profiles_by_mode.fetch(:cpu)
    results = Array.new(6) { push.deliver(profile, mode: :cpu, from_ns: 1, until_ns: 2) }
    assert_equal [true] * 6, results, "deliver queues, whatever the server"
    # At most one profile in flight and two waiting: at least three dropped
    # (deterministic: the queue holds 2).
    assert_operator push.stats[:dropped], :>=, 3
    guarded { sleep 0.01 until push.stats[:retries] >= 1 } # it has met the refusal at least once
    stats = guarded { push.stop(timeout: 0.5) }
    refute push.running?
    assert_equal 0, stats[:sent]
    assert_equal 6, stats[:dropped] + stats[:failed], stats.inspect
    assert_equal 0, stats[:queued]
    assert_match(/ECONNREFUSED|Connection refused/, stats[:last_error].to_s)
    refute_includes stats.inspect, "s3cret-tok"
    refute push.deliver(profile, mode: :cpu, from_ns: 1, until_ns: 2), "a stopped client drops"
    # Started again (the server still down), it tries again.
    push.start
    assert push.deliver(profile, mode: :cpu, from_ns: 1, until_ns: 2)
    guarded { sleep 0.01 until push.stats[:retries] > stats[:retries] }
  end

  def test_slow_server_timeouts_are_bounded_and_stop_cuts_a_hanging_request
    server = receiver(delay: :hang)
    push = client(server.url, timeout: 0.2, retries: 1, backoff: 0.01).start
    push.deliver(profiles_by_mode.fetch(:gc), mode: :gc, from_ns: 1, until_ns: 2)
    guarded { sleep 0.05 until push.stats[:failed] == 1 } # two attempts, each cut by the read timeout
    assert_equal 1, push.stats[:retries]
    assert_match(/ReadTimeout/, push.stats[:last_error])
    # A long timeout now: only stop's own bound can end the attempt.
    slow = client(server.url, timeout: 600, retries: 0).start
    slow.deliver(profiles_by_mode.fetch(:gc), mode: :gc, from_ns: 1, until_ns: 2)
    guarded { sleep 0.05 until server.requests.size >= 3 }
    stats = guarded { slow.stop(timeout: 0.3) }
    refute slow.running?
    assert_equal [0, 1], stats.values_at(:sent, :dropped), stats.inspect
  end

  def test_a_forked_child_sends_with_its_own_pid_and_queue
    skip "fork is not available" unless Process.respond_to?(:fork)
    server = receiver
    push = client(server.url).start
    profile = profiles_by_mode.fetch(:heap)
    push.deliver(profile, mode: :heap, from_ns: 1, until_ns: 2)
    guarded { sleep 0.02 until push.stats[:sent] == 1 }
    reader, writer = IO.pipe
    pid = fork do
      reader.close
      before = push.stats
      push.deliver(profile, mode: :heap, from_ns: 3, until_ns: 4)
      after = push.stop(timeout: 20)
      writer.write(Marshal.dump([before.values_at(:sent, :queued), after[:sent]]))
      writer.close
      exit!(0)
    end
    writer.close
    before, sent = Marshal.load(reader.read) # rubocop:disable Security/MarshalLoad -- our own child
    Process.wait(pid)
    assert_equal [0, 0], before, "the child starts with empty counters and queue"
    assert_equal 1, sent
    pids = server.requests.map { |r| PushReceiver.decode(r).first.label("pid") }
    assert_equal [Process.pid.to_s, pid.to_s], pids
    assert push.running?, "the parent's sender goes on"
  end

  def test_parca_writeraw_over_the_http_gateway
    server = receiver
    push = client(server.url("parca"), labels: { "region" => "eu" }).start
    profile = profiles_by_mode.fetch(:cpu)
    push.deliver(profile, mode: :cpu, from_ns: 1, until_ns: 2)
    assert_equal 1, guarded { push.stop(timeout: 30) }[:sent]
    request = server.requests.first
    assert_equal "/api/profiles/writeraw", request.path
    assert_equal "application/json", request.headers["content-type"]
    json = JSON.parse(request.body)
    assert_equal true, json["normalized"]
    labels = json["series"][0]["labels"]["labels"].to_h { |l| [l["name"], l["value"]] }
    assert_equal %w[__name__ hostname pid region ruby_version service_name], labels.keys.sort
    assert_equal "process_cpu", labels["__name__"]
    assert_equal profile.bytes, json["series"][0]["samples"][0]["rawProfile"].unpack1("m0")
  end
end
