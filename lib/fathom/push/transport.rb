# frozen_string_literal: true

module Fathom
  module Push
    # One HTTP POST of one encoded request, and what to do about its outcome.
    # Net::HTTP (standard library, no new gem) is required here, at the first
    # send, not when Fathom loads: net-http and uri are default gems, and a
    # Fathom preloaded before the application's Bundler must not activate
    # them in Ruby's own version (lib/fathom/files/stdlib.rb). The first send
    # comes one flush interval after start, when the application has booted.
    #
    # A new connection per request: a push goes out once per interval and
    # mode (minutes apart), so a kept-alive connection would mostly be one a
    # proxy or load balancer has already closed.
    class Transport
      # Outcomes: [:ok, nil], [:retry, message] (worth trying again: the
      # server is down, overloaded or slow), [:fail, message] (it will not
      # get better: 4xx other than 429, TLS errors, redirects).
      USER_AGENT = "fathom/#{Fathom::VERSION} (ruby #{RUBY_VERSION})"

      def initialize(endpoint, headers, secrets)
        @endpoint = endpoint
        @headers = headers
        @secrets = secrets.compact.reject(&:empty?)
      end

      # POSTs `body` with `content_type`; `timeout` (seconds) bounds the
      # connect, each write and each read (Net::HTTP's timeouts are per
      # operation: a server that dribbles a byte per timeout could hold a
      # request longer, which Client#stop bounds by killing the thread).
      def post(body, content_type, timeout)
        require "net/http"
        http = Net::HTTP.new(@endpoint.host, @endpoint.port)
        http.use_ssl = @endpoint.https?
        http.open_timeout = http.read_timeout = http.write_timeout = http.ssl_timeout = timeout
        http.max_retries = 0 # Client retries, with backoff; Net::HTTP would resend at once
        request = Net::HTTP::Post.new(@endpoint.path, @headers.merge("Content-Type" => content_type, "User-Agent" => USER_AGENT))
        request.body = body
        response = http.start { http.request(request) }
        outcome(response)
      rescue Timeout::Error, SystemCallError, IOError, SocketError => e # Net::*Timeout are Timeout::Errors; socket is loaded by then
        [:retry, scrub("#{e.class}: #{e.message}")]
      rescue StandardError => e # OpenSSL::SSL::SSLError (a bad certificate stays bad), Net::HTTPBadResponse...
        [:fail, scrub("#{e.class}: #{e.message}")]
      end

      # Its headers hold the secrets: never shown.
      def inspect
        "#<#{self.class} #{@endpoint}>"
      end

      private

      def outcome(response)
        code = response.code.to_i
        return [:ok, nil] if (200..299).cover?(code)

        message = scrub("HTTP #{code} from #{@endpoint}: #{Options.clean(response.body.to_s, 200)}")
        code == 429 || code >= 500 ? [:retry, message] : [:fail, message]
      end

      # Secrets never reach stats or messages, even if a server or a proxy
      # echoes a header back.
      def scrub(text)
        @secrets.reduce(Options.clean(text, 300)) { |t, secret| t.gsub(secret, "[redacted]") }
      end
    end
  end
end
