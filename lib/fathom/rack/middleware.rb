# frozen_string_literal: true

require_relative "config"
require_relative "guard"
require_relative "params"
require_relative "response"
require_relative "../process_comments"
require_relative "../files/atomic_file"
require_relative "../files/output_paths"
require_relative "../notice"
require_relative "../files/rotation"
require_relative "../process/process_token"

module Fathom
  module Rack
    # Profiles one ordinary request when it asks with ?fathom=heap|gc|cpu,
    # under the rules of the endpoints (Guard: enabled, loopback or token,
    # one profiling request of each kind at a time):
    #
    #   use Fathom::Rack::Middleware, enabled: true                # profile returned instead of the page
    #   use Fathom::Rack::Middleware, enabled: true, dir: "tmp/profiles"   # page served, profile written
    #
    #   heap  every allocation of the request (exact mode: one request is
    #         short, and sampling would catch too little of it), GC'd at the
    #         end so in-use is what the request left behind. Other threads'
    #         allocations meanwhile are in it too (the hooks are process-wide).
    #   gc    the GCs during the request.
    #   cpu   CPU time of every thread while the request runs
    #         (Fathom::CpuProfiler, every 1 ms unless ?interval=; a request is
    #         short: at the profiler's 10 ms one gave 15 samples).
    #
    # When always-on profiling (fathom/setup, the Railtie's FATHOM_DIR) runs
    # that kind, it holds Ruby's hooks: the profile is then a window of it
    # around the request (AlwaysOn#window; heap: sampled, not exact), and
    # X-Fathom-Source says "always-on" instead of "request".
    #
    # The page's body is read to its end inside the profile (a streamed body
    # does its work while it is read), then served as it was or replaced by
    # the profile (?debug=1: its text report). With dir:, the file's name is
    # in the X-Fathom-Profile response header. Requests without a non-empty
    # ?fathom= pass straight through, unchanged.
    #
    # A heap request runs the app on a copy of the Rack env, on a thread of
    # its own: after the response, the controller and whatever it loaded
    # hang off the env (env["action_controller.instance"]), which the
    # server keeps until the connection moves on, and the server thread's
    # stack still pointed at them; with both out of the way before the GC,
    # in-use is what the request left behind, not what it answered with.
    class Middleware
      KINDS = %i[heap gc cpu].freeze
      @index = 0
      @index_lock = Mutex.new

      def self.next_index
        @index_lock.synchronize { @index += 1 }
      end

      def initialize(app, **options)
        @app = app
        @config = Config.new(**options)
        @guard = Guard.new(@config)
        @rotation = @config.dir && Files::Rotation.new(@config.dir, keep_files: @config.keep_files, keep_bytes: @config.keep_mb << 20)
      end

      # Only a query with a non-empty fathom= parameter is Fathom's: any
      # other request, whatever its query (too long, malformed, fathom=
      # empty), reaches the app untouched.
      FATHOM_PARAM = /(?:\A|[&;])fathom=[^&;]/.freeze

      def call(env)
        query = env["QUERY_STRING"].to_s
        return @app.call(env) unless @config.enabled? && query.include?("fathom=") && query.match?(FATHOM_PARAM)

        params = Params.new(query, @config)
        return @app.call(env) if params["fathom"].to_s.empty?

        profiled(env, params)
      rescue Refusal => e
        Response.error(e.status, e.message, e.headers)
      end

      private

      def profiled(env, params)
        @guard.authorize!(env)
        kind = params.one_of("fathom", KINDS, nil)
        interval = params.interval(DEFAULT_CPU_INTERVAL) if kind == :cpu
        page = nil
        source = "request"
        # 1 s: what others are told to wait (Retry-After); a request is short.
        profile = @guard.exclusive(kind, 1) do
          # What Fathom allocates to run the request (its thread, the env's
          # copy) is made before the profile starts: it is not the request's.
          runner = AppRunner.new(self, env, kind)
          begin
            if (always_on = @config.always_on(kind))
              source = "always-on"
              always_on.window(kind, gc: kind == :heap) { page = runner.call }
            else
              own_profile(kind, interval) { page = runner.call }
            end
          ensure
            runner.close
          end
        end
        deliver(kind, profile, page, params, source)
      end

      DEFAULT_CPU_INTERVAL = "1ms"

      # A profiler of our own around the block; its profile, stamped with who
      # wrote it. The fork hook is registered before the profiler starts
      # and removed after it stops: its allocations are not the request's.
      def own_profile(kind, interval)
        profiler = new_profiler(kind, interval)
        Guard.stop_in_child(profiler) do
          start(profiler)
          begin
            yield
          ensure
            profiler.stop
          end
        end
        profiler.flush(gc: kind == :heap, stamp: ProcessComments.stamp)
      end

      def new_profiler(kind, interval)
        case kind
        when :heap then HeapProfiler.new(exact: true)
        when :gc then GcProfiler.new
        else Fathom::CpuProfiler.new(mode: :cpu, interval: interval)
        end
      end

      def start(profiler)
        profiler.start
      rescue Fathom::Error => e
        # Another profiler of this kind (always-on) holds Ruby's hooks, or
        # (CPU) Ruby's M:N threads are on.
        raise Refusal.could_not_start(e, "a #{profiler.class.name.split("::").last} is already running in this process")
      end

      # Runs the app for one profiled request: the response with its body
      # read to the end (and closed). For heap, on a shallow copy of the env
      # (see the class comment) and on a thread of its own: the server
      # thread's stack kept a reference to the request (puma 6 on Ruby 3.3:
      # a retention snapshot found the page's records through `thread "puma
      # srv tp 002" → via Fiber (ActionDispatch::Http::Headers) → @req →
      # @env`, after the response); a finished thread's stack holds nothing.
      # The app then sees none of the server thread's thread-locals (nothing
      # above this middleware in the Railtie's stack sets any).
      #
      # The thread and the env's copy are made when the runner is, before
      # the profile starts, and the thread waits for #call: a per-request
      # heap profile was mostly Fathom's before (its Thread.new was 94% of
      # the request's allocated bytes, the thread and the fork hook most of
      # its in-use rows; issue 43). #close ends a thread that was never
      # given the env (the profiler could not start).
      class AppRunner
        def initialize(middleware, env, kind)
          @middleware = middleware
          @env = env
          return unless kind == :heap

          @inbox = Thread::Queue.new
          @copy = env.dup
          @thread = Thread.new(@inbox) do |inbox|
            request = inbox.pop
            middleware.send(:call_app, request) if request
          end
          @thread.report_on_exception = false
        end

        def call
          return @middleware.send(:call_app, @env) unless @thread

          # Handed over, not kept: once the app returns, nothing of Fathom's
          # holds the copy (and what hangs off it) when the heap is counted.
          @inbox << @copy
          @copy = nil
          @thread.value
        end

        def close
          @copy = nil
          @inbox&.close
        end
      end

      def call_app(env)
        status, headers, body = @app.call(env)
        chunks = []
        begin
          body.each { |chunk| chunks << chunk }
        ensure
          body.close if body.respond_to?(:close)
        end
        [status, headers, chunks]
      end

      # Writes the request's profile into dir: through a Rotation, so the
      # directory keeps at most keep_files / keep_mb of Fathom's files
      # (always-on's included when they share it) at every moment. The
      # name carries the pid and the process token (lib/fathom/process/process_token.rb):
      # two containers with the same pid never collide; an existing name is
      # never replaced, the next index is taken. Returns the file's name.
      def write_rotated(kind, profile)
        ext = Files::OutputPaths.format_extension(profile.format)
        time = Time.now.utc.strftime("%Y%m%dT%H%M%SZ")
        20.times do
          name = format("request-%s-%d-%s-%s-%d%s", kind, Process.pid, ProcessToken.get, time, self.class.next_index, ext)
          return name if @rotation.write_new(File.join(@config.dir, name), profile.bytes)
        end
        raise Fathom::Error, "fathom: 20 names taken in #{@config.dir}"
      end

      def deliver(kind, profile, page, params, source)
        headers = { "x-fathom-source" => source }
        if params.debug?
          # A stamped pprof profile's report prints its comments (pid
          # first); a Firefox one has none: its own lines then.
          head = profile.format == :pprof ? "" : "#{ProcessComments.text_lines(profile).join("\n")}\n\n"
          return Response.text("#{head}#{profile.report}", headers: headers)
        end
        return Response.profile(profile, "request-#{kind}", headers) unless @config.dir

        begin
          name = write_rotated(kind, profile)
        rescue StandardError => e
          Fathom.notice { "fathom: could not write the request's #{kind} profile: #{e.class}: #{e.message}" }
          name = "not written (see the server's log)"
        end
        status, headers, body = page
        headers = headers.dup
        headers["x-fathom-profile"] = name
        headers["x-fathom-source"] = source
        headers[Response::PID] = Process.pid.to_s
        [status, headers, body]
      end
    end
  end
end
