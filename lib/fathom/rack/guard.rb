# frozen_string_literal: true

require "ipaddr"
require "openssl"
require "socket"
require_relative "response"
require_relative "../process/fork_hooks"

module Fathom
  module Rack
    # Who may ask for a profile, and how many at once. Every rule answers
    # before any profiling work starts:
    #
    #   - disabled (Config#enabled? false): nothing is served (404, as if
    #     the endpoints did not exist);
    #   - without a token: loopback clients only (REMOTE_ADDR 127.0.0.0/8 or
    #     ::1 over TCP), and the request must not look proxied: a reverse
    #     proxy on the same host makes every client look local, so a request
    #     with a client-address header (FORWARDED below), over HTTP/1.0
    #     (nginx's proxy_pass default, which adds no such header) or on a
    #     unix socket (puma and unicorn report those as 127.0.0.1) is treated
    #     as remote; others get 403;
    #   - without a token, also the Host header: only localhost, a loopback
    #     IP literal ([::1], 127.0.0.1) or a name of Config#hosts, with any
    #     port. A page on evil.example whose name the attacker re-points at
    #     127.0.0.1 (DNS rebinding) makes the victim's browser a loopback
    #     client, but it still sends `Host: evil.example`; 403 otherwise. A
    #     request without Host (HTTP/1.0) is refused by the rule above;
    #   - with a token: every request needs `Authorization: Bearer <token>`,
    #     compared in constant time; otherwise 401. Host is not checked then:
    #     a rebinding page cannot know the token, and servers reached with a
    #     token are reached by any name (an internal DNS name, an IP, a
    #     load balancer's);
    #   - one profiling request at a time in the process (the profilers and
    #     Ruby's hooks are process-wide): others get 429 with Retry-After.
    class Guard
      LOOPBACK = [IPAddr.new("127.0.0.0/8"), IPAddr.new("::1/128")].freeze
      # Headers by which proxies and CDNs name the real client: any of them
      # means the request came through something that is not the client.
      FORWARDED = %w[HTTP_X_FORWARDED_FOR HTTP_FORWARDED HTTP_X_REAL_IP HTTP_X_CLIENT_IP HTTP_TRUE_CLIENT_IP
                     HTTP_CF_CONNECTING_IP HTTP_X_CLUSTER_CLIENT_IP HTTP_FASTLY_CLIENT_IP].freeze
      # Where servers put the connection's socket in the env (a unix socket
      # is reported as REMOTE_ADDR 127.0.0.1 by puma and unicorn).
      SOCKET_KEYS = %w[puma.socket unicorn.socket pitchfork.socket].freeze
      LOCAL_NAMES = %w[localhost].freeze
      # One lock per process, shared by every app and middleware instance
      # (a new one in a forked child: see StopInChild).
      @lock = Mutex.new
      @busy_until = 0.0

      class << self
        attr_accessor :busy_until
        attr_reader :lock

        # In a forked child no profiling request runs: the thread that
        # held the lock was not copied (or, if it forked, is the child's
        # own and releases the old lock when it ends).
        def reset_after_fork
          @lock = Mutex.new
          @busy_until = 0.0
        end
      end

      # Registered with ForkHooks while a request's own profiler records
      # (the gc and profile endpoints, ?fathom=): if the app forks
      # meanwhile, the child stops that profiler (it would otherwise
      # resume there and run forever: nobody in the child waits to stop
      # it) and frees the guard, so the child can serve profiles again.
      class StopInChild
        def initialize(profiler)
          @profiler = profiler
        end

        def after_fork_child
          ForkHooks.unregister(self)
          @profiler.stop if @profiler.running?
        ensure
          Guard.reset_after_fork
        end
      end

      # Runs the block with `profiler` stopped in any child forked meanwhile.
      def self.stop_in_child(profiler)
        hook = StopInChild.new(profiler)
        ForkHooks.register(hook)
        begin
          yield
        ensure
          ForkHooks.unregister(hook)
        end
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
          raise Refusal.new(403, "profiles are served to loopback clients only, not through a proxy or a unix socket " \
                                 "(configure a token to allow others)")
        elsif !local_host?(env["HTTP_HOST"])
          raise Refusal.new(403, "Host #{shown_host(env["HTTP_HOST"])} is not a local name: without a token only " \
                                 "localhost, 127.0.0.1, [::1] and the names in hosts: (FATHOM_RACK_HOSTS) are served")
        end
      end

      # Runs the block holding the process-wide profiling lock; `seconds`
      # is how long it expects to hold it (for the others' Retry-After).
      def exclusive(seconds)
        lock = self.class.lock
        unless lock.try_lock
          wait = [(self.class.busy_until - now).ceil, 1].max
          raise Refusal.new(429, "another profiling request is running; retry in #{wait}s", "retry-after" => wait.to_s)
        end
        begin
          self.class.busy_until = now + seconds
          yield
        ensure
          lock.unlock if lock.owned?
        end
      end

      def loopback?(env)
        return false if FORWARDED.any? { |h| env.key?(h) }
        return false if env["SERVER_PROTOCOL"].to_s.upcase == "HTTP/1.0"
        return false if SOCKET_KEYS.any? { |k| defined?(UNIXSocket) && UNIXSocket === env[k] }

        addr = IPAddr.new(env["REMOTE_ADDR"].to_s)
        addr = addr.native # ::ffff:127.0.0.1 -> 127.0.0.1
        LOOPBACK.any? { |net| net.family == addr.family && net.include?(addr) }
      rescue IPAddr::Error, ArgumentError
        false
      end

      # The Host header's name (any port) is localhost, a loopback IP literal
      # or one of Config#hosts. A missing header passes: browsers always
      # send one (HTTP/1.0 requests, which may omit it, are not loopback).
      def local_host?(host)
        return true if host.nil?

        name = host_name(host.to_s) or return false
        return true if LOCAL_NAMES.include?(name) || @config.hosts.include?(name)

        addr = IPAddr.new(name).native
        LOOPBACK.any? { |net| net.family == addr.family && net.include?(addr) }
      rescue IPAddr::Error, ArgumentError
        false
      end

      private

      # "Name:port" / "[v6]:port" -> the lower-case name ("::1" for "[::1]"),
      # or nil when it is not a host.
      def host_name(host)
        m = host.match(/\A(?:\[([0-9a-fA-F:.]+)\]|([^\[\]:\s\/@]+))(?::\d{0,5})?\z/) or return nil
        (m[1] || m[2]).downcase
      end

      def shown_host(host)
        host.to_s.b[0, 60].inspect
      end

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
