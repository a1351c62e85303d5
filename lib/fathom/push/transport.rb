# frozen_string_literal: true

require_relative "../redact"

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
      # The most of a reply that is read: an answer to a push is a line of
      # JSON, and what the message shows of it is 200 characters. The rest
      # is never read (the connection is closed), so a receiver that
      # answers with 800 MB costs neither memory nor time (before: 1,040
      # MB RSS, and a stop 1-2 s past its bound while the body came in).
      BODY_LIMIT = 16 << 10

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
        http.start do
          http.request(request) do |response|
            # Returning from inside the block leaves the rest of the body
            # unread; http.start's ensure closes the connection.
            return outcome(response, bounded_body(response))
          end
        end
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

      # [the first BODY_LIMIT bytes of the body, whether there was more].
      def bounded_body(response)
        body = "".b
        response.read_body do |chunk|
          body << chunk.b
          return [body.byteslice(0, BODY_LIMIT), true] if body.bytesize > BODY_LIMIT
        end
        [body, false]
      end

      def outcome(response, (body, cut))
        code = response.code.to_i
        return [:ok, nil] if (200..299).cover?(code)

        text = Redact.message(body, secrets: @secrets, max: 200, cut: cut)
        message = scrub("HTTP #{code} from #{@endpoint}: #{text}")
        code == 429 || code >= 500 ? [:retry, message] : [:fail, message]
      end

      # Secrets never reach stats or messages, even if a server or a proxy
      # echoes a header back: replaced before the text is cut (Redact).
      def scrub(text)
        Redact.message(text, secrets: @secrets, max: 300)
      end
    end
  end
end
