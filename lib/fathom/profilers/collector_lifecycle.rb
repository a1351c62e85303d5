# frozen_string_literal: true

require_relative "../process/fork_hooks"
require_relative "../modes"
require_relative "../native"
require_relative "../notice"
require_relative "../options"
require_relative "../profile"
require_relative "../process/ractor_check"
require_relative "../process/ruby_guards"

module Fathom
  module Profilers
    # The words, in lib/ and in ext/:
    #   profiler   the Ruby object a user holds (HeapProfiler, GcProfiler,
    #              CpuProfiler, RetentionProfiler). It has a #kind (:heap,
    #              :gc, :cpu or :wall, :retention) and a #format, which name
    #              its files (Files::OutputPaths), and one verb: #flush(gc:), what
    #              was recorded since the previous flush as a Fathom::Profile
    #              (#take_firefox_part: the same window, as a part of one
    #              combined Firefox file; see Session).
    #   collector  the native object behind a profiler (@collector:
    #              Native::HeapCollector, GcCollector, CpuCollector; for
    #              retention, the Native::RetentionSnapshot each flush takes).
    #              Only profilers touch collectors.
    #
    # start / stop / running? / after_fork_child / profile / flush for the
    # profilers that wrap a native collector (@collector) behind a lock
    # (@lock: a flusher thread's flush must not race start/stop). #flush here
    # is for the collectors that encode themselves in @format (GC, CPU);
    # HeapProfiler has its own.
    module CollectorLifecycle
      # Raises Fathom::Error if another profiler of the same kind is already
      # running in this process (Ruby's hooks are process-wide), while
      # Ractors run (see RactorCheck), or where this Ruby's GC lacks what the
      # profiler reads (see RubyGuards).
      def start
        RactorCheck.refuse_if_running!("#{self.class.name}#start")
        RubyGuards.refuse_gc!(kind, "#{self.class.name}#start")
        @lock.synchronize { @collector.start }
        @stopped_for_ractor = false
        ForkHooks.register(self)
        RactorCheck.track(self)
        self
      end

      def stop
        @lock.synchronize { @collector.stop }
        ForkHooks.unregister(self)
        RactorCheck.untrack(self)
        self
      end

      # Called by RactorCheck before a Ractor is created.
      def stop_for_ractor
        stop
        @stopped_for_ractor = true
      end

      # What was recorded since start (or the previous flush), encoded in
      # @format; the next flush starts a new window (the profiler keeps
      # running), so a PeriodicFlusher writes one window per file. gzip:
      # applies to :firefox (pprof is always gzipped; by default a Firefox
      # profile is gzipped, which profiler.firefox.com reads). gc: is accepted
      # for symmetry with HeapProfiler#flush and ignored (forcing a GC here
      # would only add a GC to the profile).
      def flush(gc: false, gzip: true, stamp: nil)
        kind = Modes.profile_kind(self.kind)
        Options.boolean("gc", gc)
        gzip = Options.boolean("gzip", gzip)
        bytes = @lock.synchronize { @collector.flush(@format, gzip, stamp) }
        Profile.new(bytes, stats.merge(ractors: RactorCheck.stat(self)), kind: kind, format: @format)
      end

      # Moves the window since the previous flush into `parts` (a
      # Native::FirefoxParts) for one combined Firefox Profiler file (GC, CPU;
      # see Session); the next flush starts a new window.
      def take_firefox_part(parts)
        @lock.synchronize { @collector.flush_into(parts) }
        stats
      end

      def stopped_for_ractor?
        @stopped_for_ractor == true
      end

      # False for an object whose #initialize raised before it made its
      # collector (a bad option): nobody holds such an object, but
      # ObjectSpace.each_object still yields it until GC frees it, and a
      # caller asking every profiler "are you running?" must get an answer,
      # not a NoMethodError on nil (seen in rack_fork_test).
      def running?
        !@collector.nil? && @collector.running?
      end

      def stats
        @collector.stats
      end

      # Runs the block with the profiler started, stops it (also when the
      # block raises), then returns the flushed Fathom::Profile.
      def profile(gc: true)
        raise ArgumentError, "fathom: #{self.class.name.split("::").last}#profile needs a block" unless block_given?

        start
        begin
          yield self
        ensure
          stop
        end
        flush(gc: gc)
      end

      # Called by ForkHooks in a forked child (only while running).
      def after_fork_child
        # The lock may have been held by a thread that did not survive the fork.
        @lock = Mutex.new
        @collector.after_fork_child
      end
    end
  end
end
