# frozen_string_literal: true

require_relative "../notice"
require_relative "../options"
require_relative "../profile"
require_relative "../process/fork_hooks"
require_relative "../process/own_threads"
require_relative "../process/internal_thread"
require_relative "endpoint"
require_relative "series_labels"
require_relative "request_body"
require_relative "transport"
require_relative "../monotonic"

module Fathom
  module Push
    # Sends profiles to a backend from a thread of its own
    # (docs/internals/push.md). #deliver only appends to a bounded queue and
    # returns; the sender thread encodes, POSTs and retries. Nothing here
    # writes a file.
    class Client
      # A profile waiting to be sent. id: a UUID, the same on every retry,
      # so that the server's logs tell a retry from a new profile.
      Item = Struct.new(:bytes, :mode, :from_ns, :until_ns, :id)

      QUEUE_RANGE = (1..1024).freeze
      RETRIES_RANGE = (0..20).freeze
      TIMEOUT_NS = (1_000_000..600_000_000_000).freeze # 1 ms .. 10 min
      BACKOFF_NS = (1_000_000..600_000_000_000).freeze

      attr_reader :endpoint, :service, :labels

      # A callable given a heap profile's gzipped bytes, returning the bytes
      # to send instead (Leaks::Monitor#push_labels: the leak verdicts as
      # sample labels). Runs on the sender thread; when it raises, the
      # profile goes as it came.
      attr_writer :heap_labels

      # url: see Endpoint. service: service_name (required, non-empty).
      # labels: the user's labels (SeriesLabels.check_user_labels).
      # token: bearer token; user/password: basic auth (the URL's userinfo
      # is the default); tenant: X-Scope-OrgID. queue: profiles waiting at
      # most. timeout: seconds (or "5s") for each connect, write and read.
      # retries: attempts after the first on 5xx, 429, timeouts and
      # connection errors; backoff/max_backoff: the first and the largest
      # wait between them (doubling, with jitter).
      def initialize(url:, service:, labels: {}, token: nil, user: nil, password: nil, tenant: nil,
                     queue: 8, timeout: 10, retries: 3, backoff: 1, max_backoff: 30)
        @endpoint = Endpoint.parse("url", url)
        @service = SeriesLabels.check_label_value("service", "service_name", service)
        @labels = SeriesLabels.check_user_labels("labels", labels)
        @capacity = Options.integer("queue", queue, QUEUE_RANGE)
        @timeout = Options.duration("timeout", timeout, min_ns: TIMEOUT_NS.begin, max_ns: TIMEOUT_NS.end)
        @retries = Options.integer("retries", retries, RETRIES_RANGE)
        @backoff = Options.duration("backoff", backoff, min_ns: BACKOFF_NS.begin, max_ns: BACKOFF_NS.end)
        @max_backoff = [Options.duration("max_backoff", max_backoff, min_ns: BACKOFF_NS.begin, max_ns: BACKOFF_NS.end), @backoff].max
        headers, secrets = auth_headers(token: secret("token", token), user: secret("user", user || @endpoint.user),
                                        password: secret("password", password || @endpoint.password),
                                        tenant: secret("tenant", tenant))
        @transport = Transport.new(@endpoint, headers, secrets)
        @auth = headers.key?("Authorization") ? headers["Authorization"].split(" ").first.downcase : "none"
        reset_state
        @started = false
      end

      # Starts the sender thread (once). Returns self.
      def start
        @lock.synchronize do
          return self if @started

          @started = true
          @stopping = false
          @deadline = nil # a client stopped before starts again without one
        end
        ForkHooks.register(self)
        spawn_sender
        self
      end

      # Queues one profile and returns at once: true if queued, false if the
      # client is stopped (counted as dropped). A full queue drops its
      # oldest profile (see docs/internals/push.md, "The queue").
      def deliver(profile, mode:, from_ns:, until_ns:)
        raise TypeError, "fathom: deliver needs a Fathom::Profile, got #{Options.describe(profile)}" unless Profile === profile
        raise ArgumentError, "fathom: only pprof profiles can be pushed, got format #{profile.format.inspect}" unless profile.format == :pprof

        mode = Options.one_of("mode", mode, SeriesLabels::MODES)
        from_ns = Options.integer("from_ns", from_ns, 0..)
        until_ns = Options.integer("until_ns", until_ns, from_ns..)
        item = Item.new(profile.bytes, mode, from_ns, until_ns, uuid)
        @lock.synchronize do
          if @stopping
            @stats[:dropped] += 1
            return false
          end
          if @queue.size >= @capacity
            @queue.shift
            @stats[:dropped] += 1
          end
          @queue << item
          @wake.signal
        end
        true
      end

      # Counters since start (or since fork, in a child): sent, dropped
      # (queue full, or unsent at stop), failed (given up after retries, or
      # refused by the server), retries, queued (waiting now), last_error
      # (no secrets), endpoint, auth (the scheme only).
      def stats
        @lock.synchronize do
          # Cleaned as last_error is: it reaches log lines (the stop line).
          @stats.merge(queued: @queue.size + (@inflight ? 1 : 0), endpoint: Options.clean(@endpoint.to_s, 200), auth: @auth)
        end
      end

      # Sends what it can within `timeout` seconds, then gives up: what is
      # still queued is counted as dropped, an attempt still running is cut
      # (the thread is killed). Never blocks much longer than `timeout`.
      # Returns the stats.
      def stop(timeout: 5)
        # 0 is allowed here (stop at once), unlike a duration option.
        limit = (Integer === timeout || Float === timeout) && timeout.zero? ? 0.0 : Options.duration("timeout", timeout, min_ns: 1, max_ns: TIMEOUT_NS.end)
        thread = @lock.synchronize do
          @stopping = true
          @deadline = Monotonic.now + limit
          @wake.broadcast
          @thread
        end
        ForkHooks.unregister(self)
        if thread && !thread.join(limit)
          thread.kill
          thread.join(1) # kill interrupts a blocked read at once; 1 s is a bound, not a wait
        end
        @lock.synchronize do
          @stats[:dropped] += @queue.size + (@inflight ? 1 : 0)
          @queue.clear
          @inflight = nil
          @started = false
        end
        report_losses(stats)
      end

      # At stop, one line saying what did not reach the server (a process
      # with a down backend exits saying how much it lost, and why).
      private def report_losses(stats)
        lost = stats.values_at(:dropped, :failed)
        return stats if lost.all?(&:zero?)

        Fathom.notice do
          "fathom: push to #{stats[:endpoint]}: #{stats[:sent]} profiles sent, #{lost[0]} dropped, #{lost[1]} failed" \
            "#{stats[:last_error] ? " (last error: #{stats[:last_error]})" : ""}"
        end
        stats
      end

      # AlwaysOn before exec (ExecHooks): the last windows are queued; give
      # the sender up to `timeout` seconds to send them (exec runs no
      # at_exit). The client keeps running: if exec fails, it goes on.
      def before_exec(timeout: 2)
        deadline = Monotonic.now + Options.duration("timeout", timeout, min_ns: 1, max_ns: TIMEOUT_NS.end)
        sleep 0.01 while Monotonic.now < deadline && @lock.synchronize { !@queue.empty? || @inflight } && @thread&.alive?
        nil
      end

      def running?
        @lock.synchronize { @started && !@stopping } && @thread&.alive? ? true : false
      end

      # ForkHooks: the parent's sender thread does not exist here, and its
      # queue holds the parent's profiles (the parent sends them). The child
      # starts empty, with counters of its own, and sends with its own pid
      # (labels are built at send time).
      #
      # Idempotent per process: both ForkHooks (the client registers itself
      # when started) and AlwaysOn's Sinks call it in a child, and a second
      # call must not start a second sender.
      def after_fork_child
        return if @pid == Process.pid

        was_running = @started && !@stopping
        reset_state
        @started = was_running
        spawn_sender if was_running
      end

      def inspect
        "#<#{self.class} #{@endpoint} service=#{@service.inspect} labels=#{@labels.inspect} auth=#{@auth}>"
      end
      alias to_s inspect

      private

      def reset_state
        @pid = Process.pid
        @lock = Mutex.new
        @wake = ConditionVariable.new
        @queue = []
        @inflight = nil
        @stopping = false
        @deadline = nil
        @thread = nil
        @stats = { sent: 0, dropped: 0, failed: 0, retries: 0, last_error: nil }
      end

      def secret(name, value)
        return nil if NilClass === value
        raise TypeError, "fathom: #{name} must be a String" unless String === value
        raise ArgumentError, "fathom: #{name} must not contain line breaks" if value.match?(/[\r\n]/)

        value
      end

      def auth_headers(token:, user:, password:, tenant:)
        headers = {}
        raise ArgumentError, "fathom: give a bearer token or basic auth (user/password), not both" if token && user

        headers["Authorization"] = "Bearer #{token}" if token
        basic = user ? ["#{user}:#{password}"].pack("m0") : nil
        headers["Authorization"] = "Basic #{basic}" if basic
        headers["X-Scope-OrgID"] = tenant if tenant
        # Connect's unary protocol: the version header lets a server that
        # requires it (connect-go's WithRequireConnectProtocolHeader) accept
        # the call; others ignore it.
        headers["Connect-Protocol-Version"] = "1" if @endpoint.backend == :pyroscope
        [headers, [token, password, basic]]
      end

      def spawn_sender
        body = -> { run }
        # Marked so that no CPU or wall profile samples it (a thread that
        # waits on a queue would fill a wall profile with "blocked"); needs
        # the extension, which pushing always has loaded (something produced
        # the profiles). Without it, a plain thread, still one of Fathom's own.
        @thread = if NativeLoader.available?
                    InternalThread.start("fathom-push", &body)
                  else
                    OwnThreads.add(Thread.new(&body).tap { |t| t.name = "fathom-push"; t.report_on_exception = false })
                  end
      end

      # The sender thread's loop: take the oldest profile, send it (with
      # retries), until stopped with an empty queue or past the deadline.
      def run
        loop do
          item = @lock.synchronize do
            @wake.wait(@lock) while @queue.empty? && !@stopping
            break nil if @queue.empty? || past_deadline?

            @inflight = @queue.shift
          end
          return unless item

          send_with_retries(item)
          @lock.synchronize { @inflight = nil }
        end
      end

      def send_with_retries(item)
        item = with_heap_labels(item)
        body, content_type = RequestBody.encode(@endpoint.backend, item, labels_for(item.mode))
        attempt = 0
        loop do
          # Past stop's deadline: given up (last_error keeps the server's
          # last answer, the useful one).
          timeout = attempt_timeout or return count(:failed)
          result, message = @transport.post(body, content_type, timeout)
          return count(:sent) if result == :ok
          return count(:failed, message) if result == :fail || attempt >= @retries

          attempt += 1
          count(:retries, message)
          return count(:failed, message) unless wait_backoff(attempt)
        end
      end

      def with_heap_labels(item)
        labeller = @heap_labels
        return item unless labeller && item.mode == :heap

        bytes = labeller.call(item.bytes)
        String === bytes ? item.dup.tap { |i| i.bytes = bytes } : item
      rescue StandardError
        item
      end

      # Connect, write and read timeout of the next attempt: the client's,
      # cut to what is left before stop's deadline; nil when none is left.
      def attempt_timeout
        @lock.synchronize do
          return @timeout unless @deadline

          left = @deadline - Monotonic.now
          left > 0.001 ? [@timeout, left].min : nil
        end
      end

      # Waits before retry `attempt` (1, 2, ...): backoff * 2^(attempt-1),
      # at most max_backoff, times a random factor in [0.5, 1) so that many
      # processes that lost the server together do not come back together.
      # False if stop's deadline comes first (stop wakes the wait).
      def wait_backoff(attempt)
        delay = [@backoff * (2**(attempt - 1)), @max_backoff].min * (0.5 + (rand / 2))
        @lock.synchronize do
          until_time = Monotonic.now + delay
          while (left = until_time - Monotonic.now) > 0
            return false if @deadline && @deadline < until_time

            @wake.wait(@lock, left)
          end
          !past_deadline?
        end
      end

      def count(key, message = nil)
        @lock.synchronize do
          @stats[key] += 1
          @stats[:last_error] = message if message
        end
        nil
      end

      def labels_for(mode)
        process = { hostname: hostname, pid: Process.pid }
        args = { mode: mode, service: @service, user_labels: @labels, process: process }
        @endpoint.backend == :parca ? SeriesLabels.parca(**args) : SeriesLabels.pyroscope(**args)
      end

      # socket is loaded by then (Transport requires net/http, which needs it).
      def hostname
        require "socket"
        Socket.gethostname
      rescue StandardError
        "unknown"
      end

      def uuid
        b = Random.urandom(16).bytes
        b[6] = (b[6] & 0x0f) | 0x40 # version 4
        b[8] = (b[8] & 0x3f) | 0x80 # RFC 4122 variant
        hex = b.pack("C*").unpack1("H*")
        "#{hex[0, 8]}-#{hex[8, 4]}-#{hex[12, 4]}-#{hex[16, 4]}-#{hex[20, 12]}"
      end

      def past_deadline?
        @deadline && Monotonic.now >= @deadline
      end
    end
  end
end
