# frozen_string_literal: true

# What endpoint labels cost per request and per job (not a test; prints
# figures). Each case runs an empty Rack app (or job) N times with and
# without Fathom's labelling, alternating, R rounds; it prints the median
# ns per call of each and their difference, the added cost.
#
#   taskset -c 1 ruby -Ilib bench/request_labels.rb [--rounds 15] [--calls 100000]
#
# With ActiveSupport (the Rails app's bundle:
# BUNDLE_GEMFILE=test/rails_app/Gemfile BUNDLE_PATH=/opt/fathom-gems bundle exec ...)
# also the Rails subscriber: an instrumented start_processing.action_controller
# with and without Fathom's listener (Rails' log subscriber listens either way).
#
# Measures Fathom::Labels as loaded (lib/fathom/labels.rb); the
# "Labels.set + Labels.restore" row is that API's share of each request.
require "optparse"
require "fathom/rack/request_labels"
require "fathom/context/jobs"

rounds = 15
calls = 100_000
OptionParser.new do |o|
  o.on("--rounds N", Integer) { |v| rounds = v }
  o.on("--calls N", Integer) { |v| calls = v }
end.parse!

def now = Process.clock_gettime(Process::CLOCK_MONOTONIC, :nanosecond)

def per_call(calls)
  t = now
  i = 0
  while i < calls
    yield
    i += 1
  end
  (now - t).fdiv(calls)
end

def median(values) = values.sort[values.size / 2]

def compare(name, rounds, calls, baseline, labelled)
  base = []
  with = []
  per_call(calls / 10, &baseline)
  per_call(calls / 10, &labelled)
  rounds.times do
    base << per_call(calls, &baseline)
    with << per_call(calls, &labelled)
  end
  b = median(base)
  w = median(with)
  printf("%-44s baseline %7.0f ns  labelled %7.0f ns  added %6.0f ns (%.2f us)\n", name, b, w, w - b, (w - b) / 1000)
end

puts "ruby #{RUBY_VERSION}, #{rounds} rounds of #{calls} calls, medians"

env = { "REQUEST_METHOD" => "GET", "PATH_INFO" => "/users/42/orders/7", "SCRIPT_NAME" => "", "QUERY_STRING" => "" }
array_app = ->(_e) { [200, {}, ["ok"]] }
labelled_array = Fathom::Rack::RequestLabels.new(array_app)
compare("request, Array body", rounds, calls, -> { array_app.call(env.dup) }, -> { labelled_array.call(env.dup) })

body = Object.new
def body.each = yield("ok")
def body.close = nil
other_app = ->(_e) { [200, {}, body] }
labelled_other = Fathom::Rack::RequestLabels.new(other_app)
iterate = ->(app) { _, _, b = app.call(env.dup); b.each { nil }; b.close }
compare("request, other body (wrapped, iterated)", rounds, calls, -> { iterate.(other_app) }, -> { iterate.(labelled_other) })

# The parts: what the Labels API costs alone (replacing and restoring a
# thread's set, as every request does once), and the path pattern.
labels = { "kind" => "request", "endpoint" => "GET /users/:id/orders/:id" }
compare("  of which Labels.set + Labels.restore", rounds, calls, -> { nil },
        -> { Fathom::Labels.restore(Fathom::Labels.set(labels)) })
compare("  of which the path pattern", rounds, calls, -> { nil },
        -> { Fathom::Context::PathPattern.of("GET", "/users/42/orders/7") })

compare("job (Sidekiq/ActiveJob scope)", rounds, calls, -> { yield_self { nil } },
        -> { Fathom::Context::Jobs.run("ReportJob") { nil } })

begin
  require "active_support"
  require "active_support/notifications"
rescue LoadError
  puts "(no ActiveSupport: the Rails subscriber is not measured)"
else
  require "fathom/context/rails_endpoint"
  # Two notifiers, as in Rails without and with Fathom: Rails' log
  # subscriber (a listener doing nothing here) in both, Fathom's listener
  # (RailsEndpoint, switching the request's endpoint) in the second.
  fanouts = Array.new(2) { ActiveSupport::Notifications::Fanout.new }
  fanouts.each { |f| f.subscribe("start_processing.action_controller", ->(*) { nil }, monotonic: false) }
  fanouts[1].subscribe("start_processing.action_controller", Fathom::Context::RailsEndpoint.new, monotonic: false)
  plain, labelled = fanouts.map { |f| ActiveSupport::Notifications::Instrumenter.new(f) }
  request = Struct.new(:env) { def get_header(k) = env[k] }
  event = "start_processing.action_controller"
  scope_env = { Fathom::Context::Scope::ENV_KEY => Fathom::Context::Scope.for("request", "GET /users/:id") }
  payload = { controller: "UsersController", action: "show", request: request.new(scope_env) }
  compare("Rails start_processing (Fathom's listener)", rounds, calls, -> { plain.instrument(event, payload) },
          -> { labelled.instrument(event, payload) })
  Fathom::Labels.set({})
end
