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
# also the alternative to the Rails hook: a start_processing.action_controller
# listener.
#
# Measures Fathom::Labels as loaded (lib/fathom/labels.rb); the
# "Labels.set + Labels.restore" row is that API's share of each request.
require "fathom/rack/request_labels"
require_relative "integer_options"
require "fathom/context/jobs"

rounds, calls = BenchIntegerOptions.parse(rounds: 15, calls: 100_000)

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

# Rails: a controller's process_action with and without Fathom's hook
# (Context::RailsEndpoint::Hook, switching the request's endpoint to
# Controller#action), on a stand-in for ActionController::Base.
require "fathom/context/rails_endpoint"
class BenchController
  Request = Struct.new(:env) { def get_header(key) = env[key] }
  attr_reader :request, :action_name

  def initialize(env)
    @request = Request.new(env)
    @action_name = "show"
  end

  def run = process_action(:show)

  private

  def process_action(*) = nil
end
class BenchLabelledController < BenchController
  prepend Fathom::Context::RailsEndpoint::Hook
end
scope_env = { Fathom::Context::Scope::ENV_KEY => Fathom::Context::Scope.for("request", "GET /users/:id") }
plain = BenchController.new(scope_env)
hooked = BenchLabelledController.new(scope_env)
compare("Rails controller hook (switch to C#action)", rounds, calls, -> { plain.run }, -> { hooked.run })
Fathom::Labels.set({})

# The same switch as a listener on start_processing.action_controller
# (with the Rails app's bundle: ActiveSupport): what ActiveSupport adds for
# an "evented" listener beside Rails' log subscriber (which takes Event
# objects), the reason for the hook above.
begin
  require "active_support"
  require "active_support/notifications"
rescue LoadError
  puts "(no ActiveSupport: the listener alternative is not measured)"
else
  fanouts = Array.new(2) { ActiveSupport::Notifications::Fanout.new }
  fanouts.each { |f| f.subscribe("start_processing.action_controller", ->(_event) { nil }, monotonic: false) }
  evented = Object.new
  def evented.start(_name, _id, payload) = payload[:request].get_header(Fathom::Context::Scope::ENV_KEY)&.switch("UsersController#show")
  def evented.finish(*) = nil
  fanouts[1].subscribe("start_processing.action_controller", evented, monotonic: false)
  without, with = fanouts.map { |f| ActiveSupport::Notifications::Instrumenter.new(f) }
  payload = { controller: "UsersController", action: "show", request: BenchController::Request.new(scope_env) }
  event = "start_processing.action_controller"
  compare("  instead, a start_processing listener", rounds, calls, -> { without.instrument(event, payload) },
          -> { with.instrument(event, payload) })
  Fathom::Labels.set({})
end
