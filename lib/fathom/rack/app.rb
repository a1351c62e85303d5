# frozen_string_literal: true

require_relative "config"
require_relative "guard"
require_relative "params"
require_relative "endpoints"
require_relative "response"
require_relative "../notice"

module Fathom
  module Rack
    # The pprof endpoints as a Rack app, the way Go's net/http/pprof serves
    # them, so that `go tool pprof http://127.0.0.1:PORT/debug/fathom/heap`
    # works directly. Mount it:
    #
    #   # config.ru
    #   map("/debug/fathom") { run Fathom::Rack::App.new(enabled: true) }
    #
    # or use it as middleware, serving the prefix and passing the rest on:
    #
    #   use Fathom::Rack::App, enabled: true, prefix: "/debug/fathom"
    #
    # Options: Fathom::Rack::Config. Rules: Fathom::Rack::Guard. Needs no
    # gem: it speaks the Rack protocol (env Hash in, triple out) itself.
    class App
      attr_reader :config

      def initialize(app = nil, **options)
        @app = app
        @config = Config.new(**options)
        @guard = Guard.new(@config)
        @endpoints = Endpoints.new(@config, @guard)
      end

      def call(env)
        name = endpoint_name(env)
        return @app.call(env) if @app && (name.nil? || !@config.enabled?)
        return Response.error(404, "not found") if name.nil?

        serve(name, env)
      end

      private

      # The endpoint a request is for ("" for the index), or nil when the
      # path is not under the prefix. Mounted with `map`, Rack has already
      # moved the prefix into SCRIPT_NAME.
      def endpoint_name(env)
        path = env["PATH_INFO"].to_s
        prefix = @config.prefix
        if path == prefix || path.start_with?("#{prefix}/")
          path = path.delete_prefix(prefix)
        elsif @app || !env["SCRIPT_NAME"].to_s.end_with?(prefix)
          return nil if @app # middleware: not ours

          return nil unless path.start_with?("/") || path.empty?
        end
        path.delete_prefix("/").chomp("/")
      end

      # Whether the client takes HTML (a browser's Accept); curl sends */*
      # and gets text, as do scrapers.
      def html?(env)
        env["HTTP_ACCEPT"].to_s.downcase.include?("text/html")
      end

      # The endpoints' path as the client sees it: SCRIPT_NAME (where
      # `map` mounted the app), then the prefix when it is in PATH_INFO.
      def base(env)
        path = env["PATH_INFO"].to_s
        prefix = @config.prefix
        under = !prefix.empty? && (path == prefix || path.start_with?("#{prefix}/"))
        "#{env["SCRIPT_NAME"]}#{under ? prefix : ""}".chomp("/")
      end

      def serve(name, env)
        @guard.authorize!(env)
        unless %w[GET HEAD].include?(env["REQUEST_METHOD"])
          raise Refusal.new(405, "only GET is served", "allow" => "GET, HEAD")
        end

        params = Params.new(env["QUERY_STRING"], @config)
        return @endpoints.index(params, html: html?(env), base: base(env)) if name.empty?
        raise Refusal.new(404, "no endpoint #{name[0, 40].inspect}; see #{@config.prefix}/") unless Endpoints::NAMES.include?(name)

        @endpoints.call(name, params)
      rescue Refusal => e
        Response.error(e.status, e.message, e.headers)
      rescue StandardError, ScriptError => e
        # The details go to the server's log, never to the client.
        Fathom.notice { "fathom: #{env["PATH_INFO"]} failed: #{e.class}: #{e.message}" }
        Response.error(500, "internal error (details in the server's log)")
      end
    end
  end
end
