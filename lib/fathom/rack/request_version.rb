# frozen_string_literal: true

module Fathom
  module Rack
    # The HTTP version of a request as the server received it on the wire,
    # for Guard: nginx's default `proxy_pass` speaks HTTP/1.0 to the app
    # and adds no header naming the client, so the request line's version
    # is what tells it from a local client. Servers report that version in
    # different places (read in their sources; docs/internals/serving.md,
    # "The loopback rule behind a proxy"):
    #
    #   - puma 5.x: HTTP_VERSION (its parser's). SERVER_PROTOCOL is puma's
    #     own constant, always "HTTP/1.1" (Binder's proto_env), whatever
    #     the client sent. A client header `Version:` is appended to
    #     HTTP_VERSION by the parser: "HTTP/1.0, HTTP/1.1".
    #   - puma 6.x and 7.x: SERVER_PROTOCOL (the parser's); 6.x copies it
    #     into HTTP_VERSION, 7.x only when asked (else HTTP_VERSION is the
    #     client's `Version:` header, or absent).
    #   - unicorn, pitchfork, thin, falcon, passenger: SERVER_PROTOCOL, the
    #     request's.
    #   - WEBrick: neither. Its SERVER_PROTOCOL is the server's configured
    #     version (WEBrick::HTTPRequest#meta_vars), and Rack's handler
    #     copies that into HTTP_VERSION when no `Version:` header is sent.
    #
    # So no one key can be trusted across servers, but every key a server
    # sets is either the request's version, a constant "HTTP/1.1", or a
    # client's header. The rule: every version the env holds must be
    # HTTP/1.1 or later, and at least one must be there. An HTTP/1.0
    # request then fails under every server above but WEBrick, whatever
    # `Version:` header a client adds (it can only add a value, never
    # replace the server's); WEBrick is named and refused.
    module RequestVersion
      KEYS = %w[SERVER_PROTOCOL HTTP_VERSION].freeze
      # What a client of our own host speaks. HTTP/1.0 is what a proxy
      # speaks by default (nginx); 0.9 has no headers at all.
      CURRENT = %w[HTTP/1.1 HTTP/2 HTTP/2.0 HTTP/3 HTTP/3.0].freeze

      module_function

      # nil when the request came as HTTP/1.1 or later, else why it may
      # not have (a phrase for the 403's message).
      def not_current(env)
        software = env["SERVER_SOFTWARE"].to_s
        return "WEBrick does not report the request's HTTP version" if software.start_with?("WEBrick")

        values = KEYS.filter_map { |key| env[key] }
        return "the server did not report the request's HTTP version" if values.empty?

        versions = values.flat_map { |value| value.to_s.b.split(",").map(&:strip) } # bytes: a client's header may hold any
        old = versions.find { |v| !CURRENT.include?(v.upcase) }
        old && "it came as #{old.empty? ? "no HTTP version" : shown(old)}, not HTTP/1.1 (nginx's proxy_pass speaks HTTP/1.0)"
      end

      # A version as the message shows it: a client's header may hold anything.
      def shown(text)
        text = text.b
        text.match?(/\A[\x21-\x7e]{1,16}\z/n) ? text : text[0, 16].inspect
      end
    end
  end
end
