# frozen_string_literal: true

require_relative "../test_helper"
require "fathom/rack/request_labels"
require "fathom/sidekiq/job_labels"
require "securerandom"
require "minitest/mock"

# Fathom::Rack::RequestLabels and the job labels (lib/fathom/context/):
# the endpoint's path pattern and its bounds, the labels an app sees, and
# the thread's labels restored after a request, an exception and a body.
# All deterministic: no sampling is involved (the labels are read back from
# Fathom::Labels on the thread that runs the code).
class RequestLabelsTest < Minitest::Test
  PathPattern = Fathom::Context::PathPattern

  def teardown
    Fathom::Labels.set({})
    Fathom::Labels.span_id = nil
  end

  def env(path, method: "GET", script: "")
    { "REQUEST_METHOD" => method, "PATH_INFO" => path, "SCRIPT_NAME" => script, "QUERY_STRING" => "a=1" }
  end

  def test_path_patterns_collapse_ids_and_keep_words
    {
      "/" => "GET /",
      "" => "GET /",
      "/users" => "GET /users",
      "/users/" => "GET /users",
      "/users/42" => "GET /users/:id",
      "/users/42/orders/7" => "GET /users/:id/orders/:id",
      "/orders/#{SecureRandom.uuid}" => "GET /orders/:id",
      "/files/#{SecureRandom.hex(16)}" => "GET /files/:id",
      "/t/#{SecureRandom.urlsafe_base64(24)}" => "GET /t/:id",
      "/t/#{"abcdefghijklmnopqrstuvwxyz" * 2}" => "GET /t/:id",   # long, no digit
      "/t/hello-world" => "GET /t/hello-world",                  # a short slug is a word
      "/t/AbCdEfGhIj" => "GET /t/:id",                           # capitals: a token
      "/archive/2026-11-27" => "GET /archive/:id",
      "/u/jane@example.com" => "GET /u/:id",
      "/search/caf%C3%A9" => "GET /search/:id",
      "/api/v1/items.json" => "GET /api/v1/items.json",
      "/assets/app.css" => "GET /assets/app.css",
      "/a/b/c/d/e/f/g" => "GET /a/b/c/d/...",
      "//double//slash" => "GET /double/slash"
    }.each do |path, pattern|
      assert_equal pattern, PathPattern.of("GET", path), path
    end
    assert PathPattern.of("GET", "/x").frozen?
  end

  # A client's bytes never raise an encoding error in the request.
  def test_invalid_and_odd_encodings
    assert_equal "GET /a/:id/b", PathPattern.of("GET", (+"/a/\xff\xfe/b").force_encoding("UTF-8"))
    assert_equal "GET /a/:id/b", PathPattern.of("GET", "/a/caf\u00e9/b".b)
    assert_equal "GET /:id/:id", PathPattern.of("GET", "/a/b".encode("UTF-16LE")) # as bytes: never from Rack
    assert_equal "GET /", PathPattern.of("GET", nil)
  end

  def test_the_method_is_one_of_a_fixed_set
    assert_equal "DELETE /users/:id", PathPattern.of("DELETE", "/users/3")
    assert_equal "OTHER /", PathPattern.of("BREW#{rand(1000)}", "/")
    assert_equal "OTHER /", PathPattern.of(nil, "/")
  end

  def test_script_name_is_part_of_the_path_and_the_query_is_not
    assert_equal "GET /admin/users/:id", PathPattern.of_env(env("/users/9", script: "/admin"))
    assert_equal "POST /users", PathPattern.of_env(env("/users", method: "POST"))
  end

  # Thousands of distinct paths of four route shapes, with every kind of
  # id, give four values: the count is bounded by the routes, not the ids.
  # Deterministic: the ids come from a seeded Random (a random token can
  # be a lowercase word, e.g. hex with no digit: (6/16)**20 for these).
  def test_values_are_bounded_by_the_routes_not_the_ids
    random = Random.new(1)
    uuid = -> { random.bytes(16).unpack1("H*").sub(/\A(.{8})(.{4})(.{4})(.{4})/, '\\1-\\2-\\3-\\4-') }
    ids = [-> { random.rand(10**9).to_s }, uuid, -> { random.bytes(10).unpack1("H*") },
           -> { [random.bytes(18)].pack("m0").tr("+/", "-_") }]
    id = -> { ids.sample(random: random).call }
    shapes = [-> { "/users/#{id.call}" }, -> { "/users/#{id.call}/orders/#{id.call}" },
              -> { "/files/#{id.call}/#{id.call}/#{id.call}/#{id.call}/#{id.call}" }, -> { "/health" }]
    paths = Array.new(4000) { shapes.sample(random: random).call }
    assert_operator paths.uniq.size, :>, 2500
    patterns = paths.map { |p| PathPattern.of("GET", p) }.uniq.sort
    assert_equal ["GET /files/:id/:id/:id/...", "GET /health", "GET /users/:id", "GET /users/:id/orders/:id"], patterns
  end

  def middleware(endpoint: nil, &app)
    Fathom::Rack::RequestLabels.new(app, endpoint: endpoint)
  end

  def test_the_app_runs_labelled_and_the_thread_gets_its_labels_back
    Fathom::Labels.set("service" => "shop")
    seen = nil
    res = middleware { |_env| seen = Fathom::Labels.current; [200, {}, ["ok"]] }.call(env("/users/12"))
    assert_equal({ "service" => "shop", "kind" => "request", "endpoint" => "GET /users/:id" }, seen)
    assert_equal ["ok"], res[2], "an Array body is returned as it is"
    assert_equal({ "service" => "shop" }, Fathom::Labels.current)
  end

  def test_labels_are_restored_when_the_app_raises
    Fathom::Labels.set("service" => "shop")
    Fathom::Labels.span_id = 5
    app = middleware { |_env| raise IOError, "boom" }
    assert_raises(IOError) { app.call(env("/users/12")) }
    assert_equal({ "service" => "shop" }, Fathom::Labels.current)
    assert_equal 5, Fathom::Labels.span_id
  end

  def test_labels_nest_with_the_apps_own
    seen = nil
    app = middleware do |_env|
      Fathom::Labels.with(tenant: "acme") { seen = Fathom::Labels.current }
      [200, {}, []]
    end
    app.call(env("/"))
    assert_equal({ "kind" => "request", "endpoint" => "GET /", "tenant" => "acme" }, seen)
    assert_equal({}, Fathom::Labels.current)
  end

  def test_an_endpoint_callable_names_the_endpoint
    seen = []
    app = middleware(endpoint: ->(e) { e["PATH_INFO"].start_with?("/api") ? "api" : nil }) do |_env|
      seen << Fathom::Labels.current["endpoint"]
      [200, {}, []]
    end
    app.call(env("/api/x"))
    app.call(env("/web/7"))
    middleware(endpoint: ->(_e) { raise "a bug in the app's callable" }) { |_e| seen << Fathom::Labels.current["endpoint"] }
      .call(env("/x/1"))
    assert_equal ["api", "GET /web/:id", "GET /x/:id"], seen
    e = assert_raises(ArgumentError) { middleware(endpoint: "api") { nil } }
    assert_match(/endpoint: must respond to call/, e.message)
  end

  # If the Labels API fails, the request runs unlabelled, and says so once.
  def test_a_labels_failure_never_fails_the_request
    Fathom::Context::Scope.instance_variable_set(:@failed, nil)
    app = middleware { |e| [200, {}, [e.key?(Fathom::Rack::RequestLabels::ENV_KEY).to_s]] }
    out = nil
    Fathom::Labels.stub(:set, ->(_) { raise IOError, "no more label sets" }) do
      _, err = capture_io do
        out = Array.new(2) { app.call(env("/x"))[2] }
      end
      assert_equal 1, err.lines.grep(/endpoint labels failed, running unlabelled: IOError/).size, err
    end
    assert_equal [["false"], ["false"]], out
  ensure
    Fathom::Context::Scope.instance_variable_set(:@failed, nil)
  end

  # A body that does its work while the server iterates it (a streaming
  # template, an Enumerator) runs labelled too; in between, and after,
  # the thread has its own labels.
  class StreamingBody
    attr_reader :seen, :closed

    def initialize
      @seen = []
    end

    def each
      2.times { |i| @seen << Fathom::Labels.current["endpoint"]; yield "part #{i}" }
    end

    def close
      @closed = true
    end

    def to_path
      "/dev/null"
    end
  end

  def test_a_streaming_body_is_iterated_labelled_and_keeps_its_protocol
    body = StreamingBody.new
    _, _, wrapped = middleware { |_env| [200, {}, body] }.call(env("/feeds/99"))
    refute_same body, wrapped
    assert_equal({}, Fathom::Labels.current, "not labelled between call and the body's iteration")
    assert wrapped.respond_to?(:each)
    assert wrapped.respond_to?(:to_path)
    refute wrapped.respond_to?(:to_ary), "a body without to_ary must not seem to have one"
    refute wrapped.respond_to?(:call)
    parts = []
    wrapped.each { |part| parts << part }
    assert_equal ["part 0", "part 1"], parts
    assert_equal ["GET /feeds/:id"] * 2, body.seen
    assert_equal({}, Fathom::Labels.current)
    assert_equal "/dev/null", wrapped.to_path
    wrapped.close
    assert body.closed
  end

  def test_a_rack3_streaming_body_and_a_raising_body
    seen = nil
    stream_body = ->(stream) { seen = Fathom::Labels.current["endpoint"]; stream << "x" }
    _, _, wrapped = middleware { |_env| [200, {}, stream_body] }.call(env("/live"))
    refute wrapped.respond_to?(:each)
    out = +""
    wrapped.call(out)
    assert_equal ["GET /live", "x"], [seen, out]

    failing = Object.new
    def failing.each
      raise EOFError
    end
    _, _, wrapped = middleware { |_env| [200, {}, failing] }.call(env("/x"))
    assert_raises(EOFError) { wrapped.each { nil } }
    assert_equal({}, Fathom::Labels.current)
  end

  # The scope the Rails subscriber switches (Context::RailsEndpoint): the
  # rest of the request and its body carry the new endpoint; afterwards
  # the thread has its own labels back.
  def test_switching_the_endpoint_mid_request
    body = StreamingBody.new
    seen = nil
    app = middleware do |e|
      e[Fathom::Rack::RequestLabels::ENV_KEY].switch("UsersController#show")
      seen = Fathom::Labels.current
      [200, {}, body]
    end
    _, _, wrapped = app.call(env("/users/1"))
    assert_equal({ "kind" => "request", "endpoint" => "UsersController#show" }, seen)
    wrapped.each { nil }
    assert_equal ["UsersController#show"] * 2, body.seen
    assert_equal({}, Fathom::Labels.current)
  end

  # Sidekiq's documented server middleware signature, call(job, payload,
  # queue) { ... } (the real gem is exercised in test_real_sidekiq below
  # when it is installed).
  class HardJob; end

  def test_sidekiq_middleware_labels_the_job_class
    Fathom::Labels.set("service" => "shop")
    mw = Fathom::Sidekiq::JobLabels.new
    seen = []
    mw.call(HardJob.new, { "class" => "RequestLabelsTest::HardJob" }, "default") { seen << Fathom::Labels.current }
    mw.call(Object.new, { "class" => "ActiveJob::QueueAdapters::SidekiqAdapter::JobWrapper", "wrapped" => "RestockJob" },
            "default") { seen << Fathom::Labels.current }
    assert_raises(KeyError) { mw.call(HardJob.new, {}, "q") { raise KeyError } }
    assert_equal [{ "service" => "shop", "kind" => "job", "endpoint" => "RequestLabelsTest::HardJob" },
                  { "service" => "shop", "kind" => "job", "endpoint" => "RestockJob" }], seen
    assert_equal({ "service" => "shop" }, Fathom::Labels.current)
  end

  # A child Ruby with the gems of `gem_dir` (built for this Ruby) running
  # `script` after requiring `gems`; returns its stdout. Skips when they are
  # not installed there.
  def run_with_gems(gem_dir, gems, script)
    env = TestHelper::PLAIN_ENV.merge("GEM_PATH" => [gem_dir, *Gem.path].join(File::PATH_SEPARATOR),
                                      "DD_TRACE_STARTUP_LOGS" => "false", "DD_INSTRUMENTATION_TELEMETRY_ENABLED" => "false",
                                      "DD_REMOTE_CONFIGURATION_ENABLED" => "false")
    prelude = "begin; #{gems.map { |g| "require #{g.inspect}" }.join("; ")}; rescue LoadError => e; puts \"SKIP: \#{e.message}\"; exit; end\n"
    out, err, status = Open3.capture3(env, RbConfig.ruby, "-W0", "-I#{TestHelper::LIB}", "-e", prelude + script)
    assert status.success?, "#{out}\n#{err}"
    if (missing = out[/^SKIP: .*/])
      message = "#{missing} (script/setup installs them into #{gem_dir}, see GEMS)"
      flunk(message) if TestHelper.ci?
      skip message
    end
    out
  end

  # The child's "R: " lines (the gems log on stdout too).
  def results(out)
    out.lines.grep(/\AR: /).map { |l| l.chomp.delete_prefix("R: ") }
  end

  # Where the optional gems are, one directory per Ruby (datadog builds a
  # native extension): not the product's dependencies; script/setup
  # installs them into $FATHOM_GEMS/tracing/<RUBY_VERSION> (or
  # FATHOM_TRACING_GEMS=<dir>). Without them the tests skip, and fail in CI.
  GEMS = ENV.fetch("FATHOM_TRACING_GEMS") do
    File.join(ENV.fetch("FATHOM_GEMS", "/opt/fathom-gems"), "tracing", RUBY_VERSION)
  end

  def test_opentelemetry_span_id
    out = run_with_gems(GEMS, %w[opentelemetry/sdk], <<~'RUBY')
      require "fathom/rack/request_labels"
      OpenTelemetry::SDK.configure
      tracer = OpenTelemetry.tracer_provider.tracer("t")
      app = Fathom::Rack::RequestLabels.new(->(_e) { [200, {}, [Fathom::Labels.span_id.to_s]] })
      tracer.in_span("req") do |span|
        puts "R: #{span.context.hex_span_id}"
        puts "R: #{app.call({ "REQUEST_METHOD" => "GET", "PATH_INFO" => "/" })[2].first}"
      end
      puts "R: #{Fathom::Labels.span_id.inspect}"
      puts "R: #{app.call({ "REQUEST_METHOD" => "GET", "PATH_INFO" => "/" })[2].first.inspect}"
    RUBY
    hex, id, after, untraced = results(out)
    assert_equal hex.to_i(16), Integer(id)
    assert_equal ["nil", '""'], [after, untraced]
  end

  def test_datadog_span_id
    out = run_with_gems(GEMS, %w[datadog], <<~'RUBY')
      Datadog.configure { |c| c.tracing.enabled = true; c.diagnostics.startup_logs.enabled = false }
      require "fathom/sidekiq/job_labels"
      Datadog::Tracing.trace("job") do |span|
        puts "R: #{span.id}"
        Fathom::Sidekiq::JobLabels.new.call(Object.new, { "class" => "X" }, "q") { puts "R: #{Fathom::Labels.span_id}" }
      end
      Datadog::Tracing.shutdown!
    RUBY
    id, seen = results(out)
    assert_equal Integer(id), Integer(seen)
  end

  # Real Sidekiq 7 (its testing mode runs the server middleware chain
  # inline, no Redis needed).
  def test_real_sidekiq
    out = run_with_gems(GEMS, %w[sidekiq sidekiq/testing], <<~'RUBY')
      require "fathom/sidekiq/job_labels"
      Sidekiq::Testing.inline!
      Sidekiq::Testing.server_middleware { |chain| chain.add Fathom::Sidekiq::JobLabels }
      class ReportJob
        include Sidekiq::Job
        def perform(n) = puts("R: #{Fathom::Labels.current.sort.inspect}")
      end
      ReportJob.perform_async(1)
      puts "R: #{Fathom::Labels.current.inspect}"
      # What FATHOM_ENDPOINT_LABELS=1 does in a Sidekiq server process
      # (sidekiq/cli loaded: configure_server's block runs).
      require "sidekiq/cli"
      puts "R: #{Fathom::Sidekiq::JobLabels.install} #{Fathom::Sidekiq::JobLabels.install}"
      puts "R: #{Sidekiq.default_configuration.server_middleware.exists?(Fathom::Sidekiq::JobLabels)}"
    RUBY
    assert_equal [[["endpoint", "ReportJob"], ["kind", "job"]].inspect, "{}", "true false", "true"], results(out)
  end
end
