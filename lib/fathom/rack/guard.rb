# frozen_string_literal: true

require "ipaddr"
require "openssl"
require_relative "response"

module Fathom
  module Rack
    # Who may ask for a profile, and how many at once. Every rule answers
    # before any profiling work starts:
    #
    #   - disabled (Config#enabled? false): nothing is served (404, as if
    #     the endpoints did not exist);
    #   - without a token: loopback clients only (REMOTE_ADDR 127.0.0.0/8 or
    #     ::1, and no X-Forwarded-For / Forwarded / X-Real-IP header: a
    #     reverse proxy on the same host makes every client look local, so a
    #     forwarded request is treated as remote); others get 403;
    #   - with a token: every request needs `Authorization: Bearer <token>`,
    #     compared in constant time; otherwise 401;
    #   - one profiling request at a time in the process (the profilers and
    #     Ruby's hooks are process-wide): others get 429 with Retry-After.
    class Guard
      LOOPBACK = [IPAddr.new("127.0.0.0/8"), IPAddr.new("::1/128")].freeze
      FORWARDED = %w[HTTP_X_FORWARDED_FOR HTTP_FORWARDED HTTP_X_REAL_IP].freeze
      # One lock per process, shared by every app and middleware instance.
      LOCK = Mutex.new
      @busy_until = 0.0

      class << self
        attr_accessor :busy_until
      end

      def initialize(config)
        @config = config
      end

      # Raises Refusal unless the request may be served.
      def authorize!(env)
        raise Refusal.new(404, "not found") unless @config.enabled?

        if @config.token
          given = bearer(env)
          raise Refusal.new(401, "a valid bearer token is required", "www-authenticate" => 'Bearer realm="fathom"') unless given && same?(given, @config.token)
        elsif !loopback?(env)
          raise Refusal.new(403, "profiles are served to loopback clients only (configure a token to allow others)")
        end
      end

      # Runs the block holding the process-wide profiling lock; `seconds`
      # is how long it expects to hold it (for the others' Retry-After).
      def exclusive(seconds)
        unless LOCK.try_lock
          wait = [(self.class.busy_until - now).ceil, 1].max
          raise Refusal.new(429, "another profiling request is running; retry in #{wait}s", "retry-after" => wait.to_s)
        end
        begin
          self.class.busy_until = now + seconds
          yield
        ensure
          LOCK.unlock
        end
      end

      def loopback?(env)
        return false if FORWARDED.any? { |h| env[h] && !env[h].to_s.empty? }

        addr = IPAddr.new(env["REMOTE_ADDR"].to_s)
        addr = addr.native # ::ffff:127.0.0.1 -> 127.0.0.1
        LOOPBACK.any? { |net| net.family == addr.family && net.include?(addr) }
      rescue IPAddr::Error, ArgumentError
        false
      end

      private

      def bearer(env)
        header = env["HTTP_AUTHORIZATION"].to_s
        m = header.match(/\ABearer +(\S+)\s*\z/i) or return nil
        m[1].b
      end

      # Constant time for tokens of the token's length. The length itself
      # is compared first (it is not the secret); digests would hide it too,
      # but a length check is what Rack::Utils.secure_compare does as well.
      def same?(given, token)
        given.bytesize == token.bytesize && OpenSSL.fixed_length_secure_compare(given, token)
      end

      def now
        Process.clock_gettime(Process::CLOCK_MONOTONIC)
      end
    end
  end
end
