# frozen_string_literal: true

require_relative "../options"
require_relative "../redact"

module Fathom
  module Push
    # Where profiles go, parsed from FATHOM_PUSH (or Client.new's url:)
    # without the uri gem (a default gem: lib/fathom/files/stdlib.rb says why
    # nothing on the start path requires one).
    #
    #   pyroscope://host:port[/prefix]        Pyroscope's Push API over http
    #   pyroscope+https://host:port[/prefix]  the same over https
    #   http(s)://host[:port][/prefix]        Pyroscope (Grafana Cloud's URLs look like this)
    #   parca://host:port[/prefix]            Parca's WriteRaw through its HTTP gateway
    #   parca+https://host:port[/prefix]      the same over https
    #
    # user:password@ in the URL is basic auth (percent-decoded). The password
    # never appears in #to_s, #inspect or a message: #to_s is the URL without
    # its userinfo.
    class Endpoint
      SCHEMES = {
        "pyroscope" => [:pyroscope, "http"], "pyroscope+http" => [:pyroscope, "http"],
        "pyroscope+https" => [:pyroscope, "https"], "http" => [:pyroscope, "http"], "https" => [:pyroscope, "https"],
        "parca" => [:parca, "http"], "parca+http" => [:parca, "http"], "parca+https" => [:parca, "https"]
      }.freeze
      DEFAULT_PORTS = { "http" => 80, "https" => 443 }.freeze
      # The server's default ports, for pyroscope:// and parca:// without one.
      BACKEND_PORTS = { pyroscope: 4040, parca: 7070 }.freeze
      PATHS = { pyroscope: "/push.v1.PusherService/Push", parca: "/api/profiles/writeraw" }.freeze
      # No whitespace or control character anywhere: a host or path with
      # CR LF would otherwise reach log lines (stats[:endpoint], the stop
      # line) raw, with whatever text follows it.
      URL = %r{\A(?<scheme>[a-z][a-z0-9+.\-]*)://(?:(?<userinfo>[^@/?#\s[:cntrl:]]*)@)?
               (?<host>\[[0-9a-fA-F:.]+\]|[^:/?#\[\]@\s[:cntrl:]]+)
               (?::(?<port>\d{1,5}))?(?<path>/[^?#\s[:cntrl:]]*)?\z}x.freeze
      # What a userinfo must escape (RFC 3986: "/", "?", "#" end the
      # authority, "@" ends the userinfo), and how.
      RESERVED_HINT = "percent-encode / ? # @ in a password (%2F %3F %23 %40), and : in a user name (%3A)"

      attr_reader :backend, :scheme, :host, :port, :prefix, :user, :password

      # `name` names the setting in messages (FATHOM_PUSH or url).
      def self.parse(name, text)
        raise TypeError, "fathom: #{name} must be a String URL, got #{text.class}" unless String === text

        unless text.dup.force_encoding(Encoding::UTF_8).valid_encoding?
          raise ArgumentError, "fathom: #{name} holds bytes that are not UTF-8: #{Options.shown(Endpoint.redact(text.b))}"
        end

        text = text.dup.force_encoding(Encoding::UTF_8).strip
        m = URL.match(text)
        unless m
          hint = text.include?("@") ? " (#{RESERVED_HINT})" : ""
          raise ArgumentError, "fathom: #{name} must be a URL like pyroscope://host:4040 or parca://host:7070#{hint}, " \
                               "got #{Options.shown(Endpoint.redact(text))}"
        end
        backend, scheme = SCHEMES[m[:scheme].downcase]
        unless backend
          raise ArgumentError, "fathom: #{name}'s scheme must be one of #{SCHEMES.keys.join(", ")}, got #{m[:scheme].inspect}"
        end
        port = m[:port] ? Integer(m[:port], 10) : default_port(m[:scheme].downcase, backend, scheme)
        raise ArgumentError, "fathom: #{name}'s port must be in 1..65535, got #{port}" unless (1..65_535).cover?(port)

        user, password = (m[:userinfo] || "").split(":", 2).map { |part| unescape(part) }
        new(backend: backend, scheme: scheme, host: m[:host].delete("[]"), port: port,
            prefix: (m[:path] || "").chomp("/"), user: user.to_s.empty? ? nil : user, password: password)
      end

      def self.default_port(given, backend, scheme)
        %w[http https].include?(given) ? DEFAULT_PORTS.fetch(scheme) : BACKEND_PORTS.fetch(backend)
      end

      # A URL with its userinfo removed, for messages about a bad value:
      # everything up to the last "@", so that no part of a password with
      # an unescaped reserved character is shown (Redact.url).
      def self.redact(text)
        Redact.url(text)
      end

      def self.unescape(text)
        text.b.gsub(/%\h\h/) { |h| h[1, 2].hex.chr }.force_encoding(Encoding::UTF_8)
      end

      def initialize(backend:, scheme:, host:, port:, prefix:, user:, password:)
        @backend = backend
        @scheme = scheme
        @host = host.freeze
        @port = port
        @prefix = prefix.freeze
        @user = user
        @password = password
        freeze
      end

      def https?
        @scheme == "https"
      end

      # The request path: the prefix (a reverse proxy's) and the API's.
      def path
        "#{@prefix}#{PATHS.fetch(@backend)}"
      end

      def to_s
        host = @host.include?(":") ? "[#{@host}]" : @host
        "#{@scheme}://#{host}:#{@port}#{path}"
      end

      def inspect
        "#<#{self.class} #{@backend} #{self}#{" (basic auth)" if @user}>"
      end
    end
  end
end
