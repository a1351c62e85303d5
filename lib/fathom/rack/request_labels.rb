# frozen_string_literal: true

require_relative "../options"
require_relative "../context/scope"
require_relative "../context/path_pattern"
require_relative "../context/path_budget"
require_relative "labelled_body"

module Fathom
  module Rack
    # Labels what a request runs with its endpoint (docs/production.md,
    # "Labels by endpoint"), so that CPU, wall and heap samples can be
    # sliced by it:
    #
    #   use Fathom::Rack::RequestLabels     # config.ru; FATHOM_ENDPOINT_LABELS=1 does it in Rails
    #
    # While the request runs, the thread's labels get kind=request and
    # endpoint=<method> <path pattern> (Context::PathPattern: ids collapsed
    # to :id, at most 4 segments); in Rails the endpoint becomes the
    # route's Controller#action as soon as the controller starts
    # (Context::RailsEndpoint). Fathom::Labels.span_id is the active
    # tracer span's id (Datadog or OpenTelemetry, when loaded).
    #
    # The labels are set during `call` and again while the server iterates
    # the body (each, call(stream), to_ary: a streaming body renders then),
    # not in between; the thread's previous labels come back when `call`
    # returns or raises and after each body iteration. An Array body (no
    # deferred work) is returned as it is; any other is wrapped
    # (LabelledBody), forwarding to_path, close and everything else.
    #
    # endpoint: a callable (env) -> String or nil naming the endpoint
    # instead of the path pattern (nil: the path pattern). Its values must
    # be bounded in count, as route names are.
    #
    # max_paths: at most this many distinct path patterns (first come);
    # requests on new paths after that are labelled "GET (other paths)"
    # and it is said once (Context::PathBudget: clients choose paths, and
    # the process's label table is shared with routes and jobs).
    class RequestLabels
      # The request's Context::Scope, for the Rails controller hook.
      ENV_KEY = Context::Scope::ENV_KEY
      KIND = "request"

      def initialize(app, endpoint: nil, max_paths: Context::PathBudget::MAX)
        unless endpoint.nil? || endpoint.respond_to?(:call)
          raise ArgumentError, "fathom: RequestLabels endpoint: must respond to call(env), got #{endpoint.class}"
        end

        @app = app
        @endpoint = endpoint
        @paths = Context::PathBudget.new(Options.integer("max_paths", max_paths, 1..1024))
      end

      def call(env)
        scope, saved = Context::Scope.open(KIND, endpoint(env))
        return @app.call(env) unless scope

        env[ENV_KEY] = scope
        begin
          status, headers, body = @app.call(env)
        ensure
          scope.leave(saved)
        end
        body = LabelledBody.new(body, scope) unless body.is_a?(Array)
        [status, headers, body]
      end

      private

      # The callable's name, else the path pattern: a callable that raises
      # is the path pattern too (labels never fail a request).
      def endpoint(env)
        name = begin
          @endpoint&.call(env)
        rescue StandardError
          nil
        end
        name.is_a?(String) && !name.empty? ? name : @paths.admit(Context::PathPattern.of_env(env))
      end
    end
  end
end
