# frozen_string_literal: true

require_relative "../test_helper"
require "fathom/push/push"
require "support/push_receiver"

# FATHOM_PUSH and friends, Client.new's checks, and the protobuf writer
# against protoc. Nothing here sends anything.
class PushSettingsTest < Minitest::Test
  Push = Fathom::Push

  def env(extra = {})
    { "FATHOM_PUSH" => "pyroscope://127.0.0.1:4040" }.merge(extra)
  end

  def test_nil_unless_fathom_push_is_set
    assert_nil Push.from_env({})
    assert_nil Push.from_env("FATHOM_PUSH" => "  ")
  end

  def test_urls
    cases = {
      "pyroscope://h:4040" => [:pyroscope, "http://h:4040/push.v1.PusherService/Push"],
      "pyroscope://h" => [:pyroscope, "http://h:4040/push.v1.PusherService/Push"],
      "pyroscope+https://h" => [:pyroscope, "https://h:4040/push.v1.PusherService/Push"],
      "https://profiles.example.net/prefix/" => [:pyroscope, "https://profiles.example.net:443/prefix/push.v1.PusherService/Push"],
      "http://[::1]:8080" => [:pyroscope, "http://[::1]:8080/push.v1.PusherService/Push"],
      "parca://h" => [:parca, "http://h:7070/api/profiles/writeraw"],
      "parca+https://h:443/p" => [:parca, "https://h:443/p/api/profiles/writeraw"]
    }
    cases.each do |url, (backend, shown)|
      endpoint = Push.from_env(env("FATHOM_PUSH" => url)).endpoint
      assert_equal [backend, shown], [endpoint.backend, endpoint.to_s], url
    end
  end

  def test_bad_values_name_the_variable
    {
      { "FATHOM_PUSH" => "ftp://h" } => /FATHOM_PUSH's scheme/,
      { "FATHOM_PUSH" => "pyroscope://h:70000" } => /FATHOM_PUSH's port/,
      { "FATHOM_PUSH" => "h:4040" } => /FATHOM_PUSH must be a URL/,
      { "FATHOM_LABELS" => "region" } => /FATHOM_LABELS must be k=v/,
      { "FATHOM_LABELS" => "re-gion=eu" } => /FATHOM_LABELS: label name "re-gion"/,
      { "FATHOM_LABELS" => "__name__=x" } => /FATHOM_LABELS: label name "__name__" is set by Fathom/,
      { "FATHOM_LABELS" => "service_name=x" } => /FATHOM_LABELS: label name "service_name"/,
      { "FATHOM_LABELS" => "a=1,a=2" } => /FATHOM_LABELS gives label "a" twice/,
      { "FATHOM_LABELS" => "a=" } => /FATHOM_LABELS: the value of label "a"/,
      { "FATHOM_LABELS" => (1..17).map { |i| "l#{i}=v" }.join(",") } => /FATHOM_LABELS has 17 labels/,
      { "FATHOM_SERVICE" => "a\tb" } => /FATHOM_SERVICE/,
      { "FATHOM_PUSH_TOKEN" => "t", "FATHOM_PUSH_USER" => "u" } => /FATHOM_PUSH_TOKEN or basic auth/,
      { "FATHOM_PUSH_TENANT" => "a\nb" } => /FATHOM_PUSH_TENANT must not contain line breaks/
    }.each do |extra, message|
      error = assert_raises(ArgumentError, extra.inspect) { Push.from_env(env(extra)) }
      assert_match message, error.message
    end
  end

  def test_labels_service_and_auth_from_env
    client = Push.from_env(env("FATHOM_SERVICE" => "shop", "FATHOM_LABELS" => "region=eu, az = b ,hostname=node-1",
                               "FATHOM_PUSH_TOKEN" => "tok"))
    assert_equal "shop", client.service
    assert_equal({ "region" => "eu", "az" => "b", "hostname" => "node-1" }, client.labels)
    assert_equal "bearer", client.stats[:auth]
    assert_equal File.basename($PROGRAM_NAME), Push.from_env(env).service # no Rails here
  end

  SECRETS = %w[s3cr3t-pass t0ken-value].freeze

  def test_secrets_never_appear_in_errors_inspect_or_stats
    client = Push.from_env(env("FATHOM_PUSH" => "pyroscope://alice:s3cr3t-pass@127.0.0.1:4040"))
    token_client = Push.from_env(env("FATHOM_PUSH_TOKEN" => "t0ken-value"))
    shown = [client.inspect, client.to_s, client.stats.inspect, token_client.inspect, token_client.stats.inspect,
             client.endpoint.inspect]
    [["FATHOM_PUSH", "ftp://alice:s3cr3t-pass@h"], ["FATHOM_PUSH", "nonsense alice:s3cr3t-pass@h"],
     ["FATHOM_PUSH", "pyroscope://alice:s3cr3t-pass@h:99999"]].each do |name, value|
      shown << assert_raises(ArgumentError) { Push.from_env(env(name => value)) }.message
    end
    shown << assert_raises(ArgumentError) { Push.from_env(env("FATHOM_PUSH_TOKEN" => "t0ken-value", "FATHOM_PUSH_USER" => "u")) }.message
    shown.each { |text| SECRETS.each { |secret| refute_includes text, secret } }
    assert_equal "basic", client.stats[:auth]
  end

  def test_client_checks_its_options
    ok = { url: "pyroscope://h", service: "app" }
    assert_raises(ArgumentError) { Push::Client.new(**ok, queue: 0) }
    assert_raises(TypeError) { Push::Client.new(**ok, timeout: nil) }
    assert_raises(ArgumentError) { Push::Client.new(**ok, service: "") }
    assert_raises(TypeError) { Push::Client.new(**ok, labels: [["a", "b"]]) }
    assert_raises(ArgumentError) { Push::Client.new(**ok, labels: { "pid" => "1" }) }
    assert_raises(TypeError) { Push::Client.new(**ok, token: 5) }
    client = Push::Client.new(**ok)
    assert_raises(TypeError) { client.deliver("bytes", mode: :cpu, from_ns: 0, until_ns: 1) }
    profile = Fathom::Profile.new("x".b, {}, kind: :cpu)
    assert_raises(ArgumentError) { client.deliver(profile, mode: :heap_profile, from_ns: 0, until_ns: 1) }
    assert_raises(ArgumentError) { client.deliver(profile, mode: :cpu, from_ns: 5, until_ns: 1) }
    assert_raises(ArgumentError) { client.deliver(Fathom::Profile.new("{}", {}, format: :firefox), mode: :gc, from_ns: 0, until_ns: 1) }
  end

  # A Fathom preloaded before the application's Bundler must activate no
  # default gem (lib/fathom/files/stdlib.rb): net/http, uri, json and socket
  # wait for the first send.
  def test_loading_and_starting_activates_no_gem
    probe = 'puts Gem.loaded_specs.keys.sort.join(","), $LOADED_FEATURES.grep(%r{/(net/http|uri|json|socket)\.rb\z}).join(",")'
    program = 'require "fathom"; require "fathom/push/push"; ' \
              'c = Fathom::Push.from_env("FATHOM_PUSH" => "pyroscope://127.0.0.1:9", "FATHOM_LABELS" => "a=b").start; ' \
              "#{probe}; c.stop(timeout: 0)"
    run = lambda do |*args|
      out, err, status = Open3.capture3(TestHelper::PLAIN_ENV, RbConfig.ruby, *args)
      assert status.success?, err
      out.lines.map(&:strip)
    end
    baseline = run.call("-e", probe)
    gems, features = run.call("-I#{TestHelper::LIB}", "-e", program)
    assert_equal [], gems.to_s.split(",") - baseline[0].to_s.split(",")
    assert_equal "", features.to_s
  end

  # Varints across their byte boundaries, long fields and non-ASCII text,
  # read back by protoc from the real message definitions.
  def test_proto_writer_against_protoc
    long = "v" * 200 # a two-byte length
    raw = (0..255).map(&:chr).join.b * 70 # 17920 bytes: a three-byte length, every byte value
    body = Push::ProtoWriter.push_request([[[["__name__", "process_cpu"], ["k", long], ["ü", "ï"]], raw, "id-1"],
                                           [[["a", "b"]], "", ""]])
    request = PushReceiver::Request.new("POST", "/", {}, body)
    series = PushReceiver.decode(request)
    assert_equal 2, series.size
    assert_equal [["__name__", "process_cpu"], ["k", long], ["ü", "ï"]], series[0].labels
    assert_equal raw, series[0].samples[0].raw_profile
    assert_equal "id-1", series[0].samples[0].id
    assert_equal [["a", "b"]], series[1].labels
    assert_equal [0x96, 0x01], Push::ProtoWriter.varint(+"".b, 150).bytes
    assert_equal [0x80, 0x80, 0x80, 0x80, 0x10], Push::ProtoWriter.varint(+"".b, 2**32).bytes
  end
end
