# frozen_string_literal: true

require "ipaddr"
require "openssl"
require "socket"
require_relative "response"
require_relative "request_version"
require_relative "../process/fork_hooks"
require_relative "../monotonic"

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
    #     with a client-address header (FORWARDED below), one that did not
    #     come as HTTP/1.1 or later as the server received it (nginx's
    #     default proxy_pass speaks HTTP/1.0 and adds no such header;
    #     RequestVersion reads each server's keys) or one on a unix socket
    #     (puma and unicorn report those as 127.0.0.1) is treated as
    #     remote; others get 403, saying which it was. A proxy that speaks
    #     HTTP/1.1 and adds no header cannot be told from a local client:
    #     behind one, only a token protects (docs/production.md says so);
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
    #   - one profiling request at a time per kind in the process (heap and
    #     allocs, gc, retention, cpu: the profile endpoint and ?fathom=cpu):
    #     another of the same kind gets 429 with Retry-After. See #exclusive
    #     for why per kind, and #working for what stays process-wide.
    class Guard
      LOOPBACK = [IPAddr.new("127.0.0.0/8"), IPAddr.new("::1/128")].freeze
      # Headers by which proxies and CDNs name the real client: any of them
      # means the request came through something that is not the client.
      FORWARDED = %w[HTTP_X_FORWARDED_FOR HTTP_FORWARDED HTTP_X_REAL_IP HTTP_X_CLIENT_IP HTTP_TRUE_CLIENT_IP
                     HTTP_CF_CONNECTING_IP HTTP_X_CLUSTER_CLIENT_IP HTTP_FASTLY_CLIENT_IP].freeze
      # Headers that say a request went through a proxy without naming the
      # client: Via (Varnish, Squid, CloudFront, Google's load balancers),
      # and the X-Forwarded-* a TLS-terminating proxy adds on its own
      # (Traefik, Envoy, an ALB). No local client sends them.
      PROXIED = %w[HTTP_VIA HTTP_X_FORWARDED_PROTO HTTP_X_FORWARDED_HOST HTTP_X_FORWARDED_PORT
                   HTTP_X_FORWARDED_SERVER HTTP_X_FORWARDED_SSL].freeze
      # Where servers put the connection's socket in the env (a unix socket
      # is reported as REMOTE_ADDR 127.0.0.1 by puma and unicorn).
      SOCKET_KEYS = %w[puma.socket unicorn.socket pitchfork.socket].freeze
      LOCAL_NAMES = %w[localhost].freeze
      # The kinds that lock separately. Two requests of one kind cannot
      # share the profiler they need: a CPU profile and ?fathom=cpu both
      # want the one SIGPROF sampler (wall too); two heap fetches (or one
      # and a ?fathom=heap window) would split one profiler's window
      # between them; the GC profiler's hooks are process-wide.
      KINDS = %i[heap gc retention cpu].freeze

      # The locks are per process, shared by every app and middleware
      # instance (new ones in a forked child: see StopInChild).
      class << self
        # The lock of `kind` (Mutex), which #exclusive holds.
        def lock(kind)
          @locks.fetch(kind) { raise ArgumentError, "fathom: no guard for #{kind.inspect}; kinds: #{KINDS.join(", ")}" }
        end

        # The process-wide lock #working holds while a profile thread runs.
        attr_reader :work_lock

        def busy_until(kind) = @busy_until[kind]

        def busy!(kind, seconds_from_now)
          @busy_until[kind] = Monotonic.now + seconds_from_now
        end

        # In a forked child no profiling request runs: the threads that
        # held the locks were not copied (or, if one forked, it is the
        # child's own and releases the old lock when it ends).
        def reset_after_fork
          @locks = KINDS.to_h { |k| [k, Mutex.new] }.freeze
          @work_lock = Mutex.new
          @busy_until = KINDS.to_h { |k| [k, 0.0] }
        end

        # ForkHooks: a child forked while some thread held a lock (a heap
        # flush on the profile thread) would otherwise find it held
        # forever. Registered at the first profiling request.
        def after_fork_child = reset_after_fork
      end
      reset_after_fork

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
        elsif (why = not_loopback(env))
          raise Refusal.new(403, "profiles are served to loopback clients only, not through a proxy or a unix socket " \
                                 "(configure a token to allow others); this request: #{why}")
        elsif !local_host?(env["HTTP_HOST"])
          raise Refusal.new(403, "Host #{shown_host(env["HTTP_HOST"])} is not a local name: without a token only " \
                                 "localhost, 127.0.0.1, [::1] and the names in hosts: (FATHOM_RACK_HOSTS) are served")
        end
      end

      # Runs the block holding the lock of `kind` (KINDS); `seconds` is how
      # long it expects to hold it (for the others' Retry-After). Another
      # request of that kind gets 429; requests of other kinds go on.
      #
      # Per kind, not per process: a scraper (Grafana Alloy's
      # pyroscope.scrape) fetches each type on its own schedule, and with
      # one lock a /heap fetch got 429 for the whole of a 14 s /profile.
      # What the one lock also gave, one profile thread at a time (one
      # glibc arena for every profile, see Endpoints#work), is kept by
      # #working; the timed endpoints sleep on the server thread, outside it.
      def exclusive(kind, seconds)
        ForkHooks.register(self.class)
        lock = self.class.lock(kind)
        unless lock.try_lock
          wait = [(self.class.busy_until(kind) - Monotonic.now).ceil, 1].max
          raise Refusal.new(429, "another #{kind} profiling request is running; retry in #{wait}s", "retry-after" => wait.to_s)
        end
        begin
          self.class.busy!(kind, seconds)
          yield
        ensure
          lock.unlock if lock.owned?
        end
      end

      # Runs the block holding the process-wide work lock: a profile's
      # native work (a flush, a snapshot, a reply's gzip) runs on a thread
      # of its own inside it (Endpoints#work), so two such threads never
      # exist at once. Waits for it rather than refusing: what holds it is
      # one flush or one snapshot, never a ?seconds=N wait.
      def working(&block)
        self.class.work_lock.synchronize(&block)
      end

      def loopback?(env)
        not_loopback(env).nil?
      end

      # nil for a direct loopback client, else why the request is not one.
      def not_loopback(env)
        header = FORWARDED.find { |h| env.key?(h) } || PROXIED.find { |h| env.key?(h) }
        return "it carries #{header.delete_prefix("HTTP_").tr("_", "-")}, as proxies add" if header
        return "it came on a unix socket" if SOCKET_KEYS.any? { |k| defined?(UNIXSocket) && UNIXSocket === env[k] }

        return "its client is not on this host" unless loopback_address?(env["REMOTE_ADDR"])

        RequestVersion.not_current(env)
      end

      def loopback_address?(text)
        addr = IPAddr.new(text.to_s).native # ::ffff:127.0.0.1 -> 127.0.0.1
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
    end
  end
end
