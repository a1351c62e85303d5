# frozen_string_literal: true

require "uri"
require_relative "../redact"

module Fathom
  class CLI
    # How `fathom dump` and `fathom leaks` reach a server's Rack endpoints
    # (Fathom::Rack::App): the URL the user gave, split into the endpoint
    # without its userinfo and the credentials in it, and the one
    # Authorization header every request carries. --token (or
    # FATHOM_RACK_TOKEN) is a bearer token, what the App checks;
    # user:password@ in the URL is basic auth, as curl sends it (for a proxy
    # in front that asks for it). Messages show the URL with its userinfo
    # replaced (Redact.url), even when it does not parse.
    module EndpointAuth
      private

      # URL -> [its URI rebuilt without userinfo, with the path the block
      # makes of the URL's path and `query`; [user, password] from the
      # userinfo, percent-decoded, or nil].
      def endpoint_uri(url, query: nil)
        shown = Options.clean(Redact.url(url), 200)
        uri = URI.parse(url)
        raise UsageError, "URL must be http:// or https://, got #{shown}" unless %w[http https].include?(uri.scheme) && uri.host

        basic = uri.userinfo && uri.userinfo.split(":", 2).map { |part| percent_decoded(part) }
        # Built anew: URI#userinfo = nil leaves the userinfo in place.
        [uri.class.build(host: uri.host, port: uri.port, path: yield(uri.path), query: query), basic]
      rescue URI::InvalidURIError
        hint = url.include?("@") ? " (percent-encode / ? # @ in a password: %2F %3F %23 %40)" : ""
        raise UsageError, "not a URL: #{shown}#{hint}"
      end

      # [the Authorization header, the secrets in it (for Redact)] from
      # --token, FATHOM_RACK_TOKEN or the URL's user:password@; nil for none.
      def endpoint_auth(opts, basic)
        token = opts.fetch(:token) { ENV["FATHOM_RACK_TOKEN"] }
        token = nil if token&.empty?
        if token && basic
          from = opts.key?(:token) ? "--token" : "FATHOM_RACK_TOKEN (--token '' leaves it out)"
          raise UsageError, "give a token (#{from}) or user:password@ in URL, not both: a request has one Authorization header"
        end
        token ? ["Bearer #{token}", [token]] : basic && basic_auth(*basic)
      end

      def percent_decoded(text)
        text.b.gsub(/%\h\h/) { |h| h[1, 2].hex.chr }.force_encoding(Encoding::UTF_8)
      end

      # [the Authorization header, the secrets in it], for user:password@.
      def basic_auth(user, password)
        pair = "#{user}:#{password}"
        encoded = [pair].pack("m0")
        ["Basic #{encoded}", [password, encoded, pair].compact.reject(&:empty?)]
      end
    end

    include EndpointAuth
  end
end
