# frozen_string_literal: true

require_relative "../test_helper"
require "fathom/push/push"
require "support/push_receiver"
require "timeout"

# Fathom's CPU push held side by side with what the real `pyroscope` gem
# (Grafana's Ruby SDK: rbspy and pyroscope-rs behind FFI) sends to the same
# loopback receiver: the same endpoint, content type and label names.
#
# The gem lives apart from the bundle (it starts a sampling agent in the
# process that loads it): script/setup installs pyroscope 1.1.7 (a
# prebuilt x86_64-linux gem, plus ffi) with `gem install --install-dir`
# into $FATHOM_GEMS/pyroscope/<ruby ABI> (default
# /opt/fathom-gems/pyroscope/3.1.0 on Ruby 3.1: its ffi is built per Ruby),
# and the gem runs in a child Ruby with GEM_PATH set there.
# FATHOM_PYROSCOPE_GEMS overrides the directory.
class PushPyroscopeGemTest < Minitest::Test
  GEMS = ENV.fetch("FATHOM_PYROSCOPE_GEMS") do
    File.join(ENV.fetch("FATHOM_GEMS", "/opt/fathom-gems"), "pyroscope", RbConfig::CONFIG["ruby_version"])
  end

  GEM_PROGRAM = <<~RUBY
    require "pyroscope"
    Pyroscope.configure do |c|
      c.application_name = "gem-app"
      c.server_address = ARGV[0]
      c.tags = { "region" => "eu" }
      c.tenant_id = "team-a"
      c.basic_auth_username = "alice"
      c.basic_auth_password = "pw"
    end
    finish = Process.clock_gettime(Process::CLOCK_MONOTONIC) + Float(ARGV[1])
    x = 0
    x += 1 while Process.clock_gettime(Process::CLOCK_MONOTONIC) < finish
    Pyroscope.shutdown # hands what it has sampled to its reporting thread
    sleep 2 # which sends it after shutdown has returned (gem_request)
  RUBY

  def gem_installed?
    !Dir[File.join(GEMS, "gems", "pyroscope-*")].empty?
  end

  def setup
    skip "the pyroscope gem ships prebuilt for x86_64 only" unless RbConfig::CONFIG["host_cpu"] == "x86_64"
    unless gem_installed?
      flunk "the pyroscope gem is not in #{GEMS}: run script/setup" if TestHelper.ci?
      skip "the pyroscope gem is not installed in #{GEMS} (script/setup installs it; FATHOM_PYROSCOPE_GEMS names another directory)"
    end
    skip "protoc is not installed (script/setup installs it)" unless TestHelper.tool_available?("protoc") || TestHelper.ci?
    @server = PushReceiver.new
  end

  def teardown
    @server&.close
  end

  # The gem samples with rbspy in a thread of its own and sends from
  # pyroscope-rs's reporting thread. `Pyroscope.shutdown` returns before
  # that thread has sent the last report, and a process that exits at once
  # loses it: 4 sends in 10 runs of the program here without the `sleep`
  # after shutdown, 10 in 10 with 1 s (CI failed on this twice). rbspy may
  # also see no sample in a short run on a loaded machine (it first reads
  # the Ruby library's symbols), and then nothing is sent either: that is
  # the gem's behaviour, not what this test compares. So the program runs
  # again, longer each time: 1.5, 5 and 12 s, the last past pyroscope-rs's
  # 10 s report boundary, so that a report goes out during the run too.
  GEM_RUN_SECONDS = [1.5, 5, 12].freeze

  def gem_request
    env = TestHelper::PLAIN_ENV.merge("GEM_PATH" => GEMS, "GEM_HOME" => GEMS)
    outputs = []
    GEM_RUN_SECONDS.each do |seconds|
      out, status = Timeout.timeout(120) do
        Open3.capture2e(env, RbConfig.ruby, "-e", GEM_PROGRAM, "http://127.0.0.1:#{@server.port}", seconds.to_s)
      end
      assert status.success?, "the pyroscope gem's program failed: #{out}"
      outputs << out
      next unless @server.next_request(timeout: 15)

      @gem_requests = @server.requests.size
      return @server.requests.first
    end
    flunk "the pyroscope gem sent nothing in runs of #{GEM_RUN_SECONDS.join(", ")} s; its output: #{outputs.inspect}"
  end

  def fathom_request
    Fathom::NativeLoader.require!
    profile = Fathom.profile(mode: :cpu) do
      finish = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 0.3
      nil while Process.clock_gettime(Process::CLOCK_MONOTONIC) < finish
    end
    push = Fathom::Push::Client.new(url: "pyroscope://127.0.0.1:#{@server.port}", service: "fathom-app",
                                    labels: { "region" => "eu" }, user: "alice", password: "pw", tenant: "team-a")
    push.start
    push.deliver(profile, mode: :cpu, from_ns: 0, until_ns: 1)
    assert_equal 1, Timeout.timeout(60) { push.stop(timeout: 30) }[:sent]
    @server.requests.drop(@gem_requests).last
  end

  def test_fathom_sends_what_the_pyroscope_gem_sends
    theirs = gem_request
    ours = fathom_request
    assert_equal theirs.path, ours.path
    assert_equal "/push.v1.PusherService/Push", ours.path
    assert_equal theirs.headers["content-type"], ours.headers["content-type"]
    %w[authorization x-scope-orgid].each { |h| assert_equal theirs.headers[h], ours.headers[h], h }

    their_series = PushReceiver.decode(theirs) # the gem gzips the body (Content-Encoding: gzip)
    our_series = PushReceiver.decode(ours)
    their_names = their_series.flat_map { |s| s.labels.map(&:first) }.uniq
    our_names = our_series.first.labels.map(&:first)
    assert_includes their_names, "__name__"
    assert_empty their_names - our_names, "label names the gem sends and Fathom does not"
    assert_equal their_series.first.label("__name__"), our_series.first.label("__name__")
    assert_equal "process_cpu", our_series.first.label("__name__")
    assert_equal their_series.first.label("process.runtime.version"), our_series.first.label("process.runtime.version")
    assert_equal "eu", our_series.first.label("region")
  end
end
