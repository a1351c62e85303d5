# frozen_string_literal: true

require_relative "../options"
require_relative "../env_text"
require_relative "endpoint"
require_relative "series_labels"
require_relative "client"

module Fathom
  # Sending profiles to a continuous-profiling backend (Grafana Pyroscope,
  # Parca) instead of, or besides, writing files. docs/internals/push.md
  # explains the protocol, the labels and the sender; README's "Sending
  # profiles to Pyroscope / Grafana" is the user's side.
  module Push
    module_function

    # A Client configured from `env` (ENV, or a Hash of the same shape), not
    # started; nil unless FATHOM_PUSH is set. Bad values raise ArgumentError
    # (or TypeError) naming the variable. Secrets (FATHOM_PUSH_TOKEN,
    # FATHOM_PUSH_PASSWORD, the URL's password) never appear in messages.
    def from_env(env = ENV)
      # Bytes that are not UTF-8 are an error naming the variable (EnvText).
      value = EnvText.reader(env)
      url = value["FATHOM_PUSH"] or return nil

      Endpoint.parse("FATHOM_PUSH", url) # the URL's errors name the variable
      service = value["FATHOM_SERVICE"]&.strip || default_service
      SeriesLabels.check_label_value("FATHOM_SERVICE", "service_name", service)
      labels = value["FATHOM_LABELS"] ? SeriesLabels.parse("FATHOM_LABELS", value["FATHOM_LABELS"]) : {}
      opts = { url: url, service: service, labels: labels, token: value["FATHOM_PUSH_TOKEN"],
               user: value["FATHOM_PUSH_USER"], password: value["FATHOM_PUSH_PASSWORD"],
               tenant: value["FATHOM_PUSH_TENANT"] }
      rename_errors { Client.new(**opts) }
    end

    # The Rails application's name when Rails has one (what its module is
    # called, in snake_case: MyShop::Application is my_shop), else the
    # program's file name.
    def default_service
      if defined?(::Rails) && ::Rails.respond_to?(:application) && (app = ::Rails.application)
        name = app.class.name.to_s.split("::").first.to_s
        return name.gsub(/([a-z\d])([A-Z])/, '\1_\2').downcase unless name.empty?
      end
      File.basename($PROGRAM_NAME.to_s).then { |n| n.empty? ? "ruby" : n }
    end

    # Client.new names its keywords (token, tenant...); from_env's caller set
    # variables, so its messages name them.
    VARIABLES = { "url" => "FATHOM_PUSH", "token" => "FATHOM_PUSH_TOKEN", "user" => "FATHOM_PUSH_USER",
                  "password" => "FATHOM_PUSH_PASSWORD", "tenant" => "FATHOM_PUSH_TENANT" }.freeze

    def rename_errors
      yield
    rescue ArgumentError, TypeError => e
      message = e.message.sub(/\Afathom: (#{VARIABLES.keys.join("|")})\b/) { "fathom: #{VARIABLES[$1]}" }
      message = message.sub("give a bearer token or basic auth (user/password)",
                            "give FATHOM_PUSH_TOKEN or basic auth (FATHOM_PUSH_USER/FATHOM_PUSH_PASSWORD or the URL's user:password@)")
      raise e.class, message
    end
  end
end
