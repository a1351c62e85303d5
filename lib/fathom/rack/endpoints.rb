# frozen_string_literal: true

require_relative "response"
require_relative "../process_comments"
require_relative "../process/own_threads"
require_relative "../process/ruby_guards"
require_relative "../modes"
require_relative "index"
require_relative "dump_body"
require_relative "../leaks/notes"

module Fathom
  module Rack
    # What each endpoint does, once Guard has let the request in. Each
    # method returns a Rack triple or raises Refusal. Named as Go's
    # net/http/pprof names them, so `go tool pprof URL` reads them:
    #
    #   heap        the running heap profiler's profile (inuse_space default)
    #   allocs      the same, alloc_space as default sample type
    #   gc          a GC profile recorded for ?seconds=N
    #   retention   a retention snapshot (why objects are alive)
    #   dump        a heap dump (ObjectSpace.dump_all's JSON lines, gzipped)
    #   profile     CPU/wall for ?seconds=N (Fathom::CpuProfiler)
    #   leaks       the leak verdicts of FATHOM_LEAKS=1 (JSON, ?debug=1 text);
    #               ?holders=FILE:LINE,... a snapshot of what holds the live
    #               sampled objects of those sites (Leaks::Holders)
    class Endpoints
      NAMES = %w[heap allocs gc retention dump profile leaks].freeze
      TIMED = %w[gc profile].freeze # they run for ?seconds=N (Retry-After)
      # Which Guard lock each takes (Guard::KINDS).
      KIND = { "heap" => :heap, "allocs" => :heap, "gc" => :gc, "retention" => :retention,
               # A dump forks as a snapshot does: one child at a time.
               "dump" => :retention, "profile" => :cpu,
               # The verdicts are read, not made; ?holders= forks a snapshot (#call).
               "leaks" => :heap }.freeze
      ENABLE_LEAKS = "FATHOM_LEAKS=1 is not on in this process: start it with FATHOM_LEAKS=1 FATHOM_MODE=heap " \
                     "(FATHOM_DIR=...), or let `fathom leaks URL` fetch the heap series itself"
      # ?holders=: at most this many sites per snapshot.
      MAX_HOLDER_SITES = 20
      HOLDER_SITE = /\A(.+):(\d+)\z/.freeze
      ENABLE_HEAP = "no heap profiler is running in this process. Start one at boot: " \
                    "RUBYOPT=-rfathom/setup FATHOM_MODE=heap (or Fathom::HeapProfiler.new.start, " \
                    "passed to Fathom::Rack::App.new(heap: profiler))"

      def initialize(config, guard)
        @config = config
        @guard = guard
      end

      # Every request holds its kind's guard (Guard#exclusive: one heap,
      # one gc, one retention, one CPU request at a time; different kinds
      # at once). Its native work (starting a profiler, a flush, a
      # snapshot, the reply's gzip) runs in #work: on a thread of its own
      # (#on_own_thread: one glibc arena for all of them, not one per
      # server thread) under the process-wide work lock (Guard#working),
      # so two profile threads never overlap (an overlap gave glibc cause
      # to make a second arena, kept for the process's life, and let a
      # reply's gzip run beside the next profile). The ?seconds=N wait of
      # gc and profile is on the server thread, outside the work lock: a
      # /heap fetch waits for at most one flush, not 14 s. A refused
      # request costs no thread.
      def call(name, params)
        seconds = TIMED.include?(name) ? params.seconds : 1
        kind = name == "leaks" && params["holders"] ? :retention : KIND.fetch(name)
        @guard.exclusive(kind, seconds) { send(name, params) }
      end

      # The page at the prefix (Index): HTML for a browser, text otherwise.
      def index(params, html: false, base: @config.prefix)
        Index.new(@config).response(html: html, base: base, debug: params.debug?)
      end

      def heap(params, default_sample_type: nil, name: "heap")
        params.format(%i[pprof])
        profiler = @config.heap_profiler or raise Refusal.new(409, ENABLE_HEAP)
        gc = params.flag("gc")
        work do
          # With the process's memory (Leaks::Notes): `fathom leaks URL` reads it.
          profile = profiler.flush(gc: gc, stamp: stamp(params, default_sample_type, extra: Leaks::Notes.lines))
          reply(profile, params, name, default_sample_type: default_sample_type)
        end
      end

      def allocs(params)
        heap(params, default_sample_type: "alloc_space", name: "allocs")
      end

      def gc(params)
        format = params.format(%i[pprof firefox])
        seconds = params.seconds
        if (always_on = @config.always_on(:gc))
          # The next N seconds of the always-on GC profiler (its files keep them too).
          running = always_on.profilers[:gc].format
          unless format == running
            raise Refusal.new(409, "the always-on GC profiler in this process writes #{running}: ask for ?format=#{running}")
          end

          profile = always_on.window(:gc, run: method(:work)) { sleep(seconds) }
          return work { reply(profile, params, "gc", capped: params.capped, source: "always-on") }
        end
        if @config.gc_profiler
          raise Refusal.new(409, "a GC profiler that this app started itself is running in this process")
        end

        run_for(seconds, params, "gc", "another GC profiler is running in this process") { GcProfiler.new(format: format) }
      end

      def retention(params)
        params.format(%i[pprof])
        force = params.flag("force")
        refuse_unsupported(:retention)
        objects = GC.stat(:heap_live_slots)
        if objects > @config.retention_max_objects && !force
          raise Refusal.new(413, "the heap holds #{objects} objects, above retention_max_objects " \
                                 "(#{@config.retention_max_objects}); the snapshot's forked child would need about " \
                                 "#{(objects * 110e-6).round} MB and #{(objects * 1e-6).round(1)} s of CPU or more. " \
                                 "Add ?force=1 to take it anyway")
        end
        work { reply(Fathom.retention_snapshot(progress: nil, stamp: stamp(params)), params, "retention", gc: true) }
      end

      # A heap dump (Profilers::HeapDump) written by a forked child into a temp file,
      # streamed back and removed: the app pauses for fork() only. Never
      # with string contents (a dump fetched over HTTP leaves the host).
      # ?debug=1 has no text form: the dump is for fathom analyze.
      def dump(params)
        raise Refusal.new(400, "dump has no text form (?debug=1): fetch it and run fathom analyze") if params.debug?

        params.one_of("format", %i[json], :json)
        refuse_unsupported(:dump)
        objects = GC.stat(:heap_live_slots)
        if objects > @config.dump_max_objects && !params.flag("force")
          raise Refusal.new(413, "the heap holds #{objects} objects, above dump_max_objects " \
                                 "(#{@config.dump_max_objects}); the dump would be about " \
                                 "#{(objects * 28 / 1e6).round} MB gzipped. Add ?force=1 to take it anyway")
        end
        work { DumpBody.reply(Fathom::Profilers::HeapDump) }
      end

      # While always-on profiling runs this mode, a window of it (as gc:
      # the always-on files and sinks keep every sample once; its interval
      # and format apply). Always-on in the other CPU mode holds the one
      # sampler: 409 naming the mode to ask for.
      def profile(params)
        mode = params.one_of("mode", %i[cpu wall], :cpu)
        format = params.format(%i[pprof firefox])
        seconds = params.seconds
        interval = params.interval(nil)
        if (always_on = @config.always_on(mode))
          running = always_on.profilers[mode].format
          raise Refusal.new(409, "always-on #{mode} profiling in this process writes #{running}: ask for ?format=#{running}") unless format == running

          profile = always_on.window(mode, run: method(:work)) { sleep(seconds) }
          return work { reply(profile, params, mode.to_s, capped: params.capped, source: "always-on") }
        end
        if (other = (Modes::CPU_MODES - [mode]).find { |m| @config.always_on(m) })
          raise Refusal.new(409, "always-on #{other} profiling holds the CPU sampler in this process: ask for ?mode=#{other}")
        end

        busy = "another CPU profiler is running in this process, or SIGPROF is taken"
        options = interval ? { interval: interval } : {}
        run_for(seconds, params, mode.to_s, busy) { Fathom::CpuProfiler.new(mode: mode, format: format, **options) }
      end

      # The leak verdicts FATHOM_LEAKS=1 keeps (Leaks::Monitor#document), or
      # with ?holders=FILE:LINE,... a forked snapshot that follows the live
      # sampled objects of those sites (what `fathom leaks URL` asks once
      # it finds a leak): {"holders": [record, ...]} (Leaks::Holders).
      def leaks(params)
        require_relative "../leaks/monitor"
        return leak_holders(params) if params["holders"]

        monitor = Leaks::Monitor.current or raise Refusal.new(409, ENABLE_LEAKS)
        if params.debug?
          analysis = monitor.analysis
          text = analysis ? Leaks::Text.render([analysis]) : "No window analysed yet.\n"
          return Response.text(ProcessComments.who.join("\n") << "\n\n" << text)
        end
        json(monitor.document)
      end

      def leak_holders(params)
        profiler = @config.heap_profiler or raise Refusal.new(409, ENABLE_HEAP)
        sites = params["holders"].split(",").map(&:strip).reject(&:empty?)
        raise Refusal.new(400, "holders must name at most #{MAX_HOLDER_SITES} sites") if sites.size > MAX_HOLDER_SITES
        raise Refusal.new(400, "holders must name sites as FILE:LINE, comma-separated") if sites.empty?

        wanted = sites.map do |text|
          m = HOLDER_SITE.match(text) or raise Refusal.new(400, "holders must name sites as FILE:LINE, comma-separated")
          [text, m[1], m[2].to_i]
        end
        records = work { Leaks::Holders.explain(profiler, wanted) }
        json({ "pid" => Process.pid, "holders" => records })
      end

      private

      # 501 where this Ruby's GC lacks what the feature reads
      # (RubyGuards.gc_refusal): said before GC.stat(:heap_live_slots),
      # which would raise an ArgumentError that ends as a 500.
      def refuse_unsupported(feature)
        reason = RubyGuards.gc_refusal(feature)
        raise Refusal.new(501, reason) if reason
      end

      def json(document)
        require "json" # here, not at load (lib/fathom/files/stdlib.rb)
        body = JSON.generate(document)
        [200, Response.base_headers.merge("content-type" => "application/json", "content-length" => body.bytesize.to_s), [body]]
      end

      # The timed endpoints (gc, profile): the block's profiler for
      # `seconds` (#call holds the guard), then its reply. Started in
      # #work, the wait on the server thread. A profiler that cannot
      # start is a 409, not a 500: `busy` (another of its kind holds Ruby's
      # hooks or SIGPROF), or (CPU/wall) Ruby's M:N threads are on.
      def run_for(seconds, params, name, busy)
        profiler = yield
        begin
          work do
            profiler.start
          rescue Fathom::Error => e
            raise Refusal.could_not_start(e, busy)
          end
          Guard.stop_in_child(profiler) { sleep(seconds) }
        ensure
          profiler.stop if profiler.running? # also when the server thread was interrupted
        end
        work { reply(profiler.flush(stamp: stamp(params)), params, name, capped: params.capped) }
      end

      # The block on a profile thread, under the work lock (see #call).
      def work(&block)
        @guard.working { on_own_thread(&block) }
      end

      # Who wrote the profile (pid, hostname, Ruby, the window), written
      # into it by the encoder (ProcessComments), and the default sample
      # type the endpoint wants. Not for ?debug=1: the text prints those
      # lines above the report instead (#reply).
      def stamp(params, default_sample_type = nil, extra: nil)
        ProcessComments.stamp(default_sample_type: default_sample_type, extra: extra) unless params.debug?
      end

      # Runs the block on a thread of its own and returns its value (or
      # raises its exception; a Refusal stays a Refusal). A profile's many
      # small native allocations (a snapshot's names and hash tables, the
      # flush's tables; the large arrays are mapped, see
      # core/base/mapped_vector.h) and its reply's (gunzip + gzip of the
      # profile) go to the glibc arena of the thread that makes them, and
      # malloc_trim does not shrink the top of a thread's arena: served
      # from any of a server's threads, each thread's arena grew
      # (bench/rack_load.rb --malloc-stats: worker arenas 2.7-4.7 MB each
      # after 13 snapshots, 0.5-0.9 MB with the profile made here, as in a
      # run without fetches). A new thread gets the arena of the last
      # thread that ended (glibc's free list; Ruby 3.1 also reuses the
      # ended thread's native thread), so every profile reuses one arena
      # (docs/internals/serving.md, "Memory after serving"). The server thread
      # only waits (holding the guard's Mutex, which it took).
      #
      # An exception raised into the waiting server thread (rack-timeout's
      # Thread#raise, a Timeout) must not let it release the guard while
      # the profile still runs, or a second profile would run beside it:
      # it waits for the profile thread first, deaf to further interrupts
      # (the wait is bounded by max_seconds or one snapshot), then lets the
      # exception go on.
      def on_own_thread(&block)
        thread = Thread.new(&block)
        thread.name = "fathom-profile"
        OwnThreads.add(thread)
        thread.report_on_exception = false
        thread.value
      ensure
        if thread&.alive?
          Thread.handle_interrupt(Object => :never) do
            thread.join
          rescue Exception # rubocop:disable Lint/RescueException -- the profile's own outcome no longer matters
            nil
          end
        end
      end

      # What a profile needed (a snapshot's graph, the encoder's tables,
      # zlib's buffers) was malloc'ed by the thread serving the request, and
      # glibc keeps freed memory in that thread's arena: with a pool of
      # server threads, RSS ratchets up by a profile's working set per
      # thread. malloc_trim(0) gives it back (measured in
      # docs/internals/serving.md, "Serving profiles over HTTP"); it runs without the GVL.
      def give_back_memory
        Native.malloc_trim if Native.respond_to?(:malloc_trim)
      end

      # The profile as pprof with who/when comments, or its text report
      # (?debug=1) headed by the same lines. capped: say that ?seconds= was lowered.
      # gc: run a GC before the trim, so that what the profile was made of
      # (a snapshot's native graph, which lives in its Ruby object) and the
      # reply's own garbage are freed, and given back, now rather than at a
      # later GC, after which no trim would run.
      def reply(profile, params, name, default_sample_type: nil, capped: false, gc: false, source: nil)
        headers = capped ? { "x-fathom-seconds-capped" => @config.max_seconds.to_s } : {}
        headers["x-fathom-source"] = source if source
        if params.debug?
          # Who answered first (pid, hostname, Ruby, the window): behind a
          # preforking server each worker is its own process, and the pprof
          # form carries these as comments; the text has none. (An always-on
          # window is stamped: its report prints them.)
          text = ProcessComments.text_lines(profile).join("\n") << "\n"
          text << "(seconds capped at #{@config.max_seconds})\n" if capped
          text << "\n" << profile.report(sample_index: default_sample_type)
          return Response.text(text, headers: headers)
        end

        response = Response.profile(profile, name, headers)
        GC.start if gc
        give_back_memory
        response
      end
    end
  end
end
