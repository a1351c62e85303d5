# frozen_string_literal: true

module Fathom
  module Context
    # A request's `endpoint` label when no router names it: the method and a
    # path pattern whose values are bounded in count, so that a label never
    # carries a raw path with ids in it (each distinct value is a series in
    # the backend, and the native side caps distinct label sets).
    #
    #   PathPattern.of("GET", "/users/42/orders/9f1c…e2")  # => "GET /users/:id/orders/:id"
    #   PathPattern.of("GET", "/a/b/c/d/e/f")               # => "GET /a/b/c/d/..."
    #   PathPattern.of("BREW", "/")                         # => "OTHER /"
    #
    # A segment is kept only when it is a word: lowercase letters, "_", "-"
    # and "." (index.html), at most 32 characters, or an API version (v1,
    # v12). Anything else becomes ":id": numbers, UUIDs, hex and base64
    # tokens (a random token of 8 or more characters almost always has a
    # digit or a capital), dates, e-mail addresses, percent-encoded text,
    # long slugs, and any segment with a capital letter ("/Users/Profile"
    # too: the price of not keeping tokens). A short lowercase slug
    # ("/blog/hello-world") cannot be told from a route's word and is kept:
    # apps with such paths should let a router name the endpoint (Rails
    # does), or pass `endpoint:` to the middleware; the native side's cap
    # on distinct label sets bounds what is left.
    module PathPattern
      MAX_SEGMENTS = 4
      WORD = /\A(?:[a-z_.-]{1,32}|v\d{1,3})\z/.freeze
      # A path that is its own pattern (1 to 4 words, no trailing "/"): one
      # match instead of a pass per segment, 3x faster (bench: 0.9 vs 2.6 us
      # on a loaded machine) for the cost of one failed match (+10%) on a
      # path with ids.
      CLEAN = %r{\A(?:/(?:[a-z_.-]{1,32}|v\d{1,3})){1,4}\z}.freeze
      ID = ":id"
      # The method is the client's text: any other becomes OTHER.
      METHODS = %w[GET HEAD POST PUT PATCH DELETE OPTIONS].to_h { |m| [m, m] }.freeze
      OTHER = "OTHER"

      module_function

      # `path` is the request's path without the query (SCRIPT_NAME +
      # PATH_INFO); a frozen String. Bytes that are not valid in the
      # path's encoding (a client's) are matched as bytes: never an
      # encoding error in a request.
      def of(method, path)
        path = path.to_s
        path = path.b unless path.encoding.ascii_compatible? && path.valid_encoding?
        return "#{METHODS[method] || OTHER} #{path}".freeze if CLEAN.match?(path)

        out = +(METHODS[method] || OTHER)
        out << " "
        n = 0
        path.split("/") do |segment|
          next if segment.empty?

          if n == MAX_SEGMENTS
            out << "/..."
            break
          end
          out << "/" << (WORD.match?(segment) ? segment : ID)
          n += 1
        end
        out << "/" if n.zero?
        out.freeze
      end

      # The pattern of a Rack env.
      def of_env(env)
        script = env["SCRIPT_NAME"]
        path = env["PATH_INFO"]
        path = "#{script}#{path}" if script && !script.empty?
        of(env["REQUEST_METHOD"], path)
      end
    end
  end
end
