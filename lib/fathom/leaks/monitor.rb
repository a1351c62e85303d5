# frozen_string_literal: true

require_relative "../notice"
require_relative "../options"
require_relative "../process/own_threads"
require_relative "../process/process_token"
require_relative "rules"
require_relative "history"
require_relative "notes"
require_relative "window"
require_relative "analysis"
require_relative "holders"
require_relative "text"
require_relative "json"
require_relative "../monotonic"

module Fathom
  module Leaks
    # FATHOM_LEAKS=1: the verdicts kept in the process. A sink of AlwaysOn
    # (Sinks: deliver, stop, after_fork_child) that reads each heap window
    # as `fathom leaks` reads a file, on a thread of its own ("fathom-leaks":
    # the flusher only queues the profile), keeps the series bounded
    # (History: `sites` sites plus "(other sites)", `windows` windows), and
    #
    # - says one line in the log (Fathom.notice, stderr) when a site's
    #   verdict becomes a confident leak, with its holder when known, and
    #   one when the process grows outside Ruby objects;
    # - takes a forked retention snapshot that follows the leaking sites'
    #   live sampled objects (Holders.explain) when a leak is new, at most
    #   once per `snapshot_every` seconds (0: only on request), and writes
    #   the holders into every later heap window (Notes);
    # - serves the verdicts as JSON at /debug/fathom/leaks (#document).
    class Monitor
      ENV_NAMES = %w[FATHOM_LEAKS FATHOM_LEAKS_SITES FATHOM_LEAKS_WINDOWS FATHOM_LEAKS_SNAPSHOT_EVERY
                     FATHOM_LEAKS_MIN_WINDOWS].freeze
      DEFAULTS = { sites: 100, windows: 60, snapshot_every: 3600, min_windows: Rules::DEFAULTS[:min_windows] }.freeze
      SITES_RANGE = (1..10_000).freeze
      WINDOWS_RANGE = (4..10_000).freeze
      # Profiles waiting for the thread: a slow analysis skips windows
      # rather than holding profiles without bound.
      QUEUE = 2

      @current = nil

      class << self
        # The monitor AlwaysOn runs in this process (nil without FATHOM_LEAKS=1).
        attr_accessor :current

        # nil unless FATHOM_LEAKS=1; ArgumentError naming the variable for
        # a bad value.
        def from_env(env)
          value = env["FATHOM_LEAKS"].to_s.strip
          return nil if value.empty? || !Options.parse_boolean("FATHOM_LEAKS", value)

          opts = {}
          int = ->(name, range) { Options.parse_integer(name, env[name], range) if env[name] && !env[name].strip.empty? }
          opts[:sites] = int.call("FATHOM_LEAKS_SITES", SITES_RANGE)
          opts[:windows] = int.call("FATHOM_LEAKS_WINDOWS", WINDOWS_RANGE)
          opts[:min_windows] = int.call("FATHOM_LEAKS_MIN_WINDOWS", Rules::MIN_WINDOWS_RANGE)
          if (v = env["FATHOM_LEAKS_SNAPSHOT_EVERY"]) && !v.strip.empty?
            opts[:snapshot_every] = v.strip == "0" ? 0 : Options.duration_ns("FATHOM_LEAKS_SNAPSHOT_EVERY", v, min_ns: 1_000_000, max_ns: 86_400_000_000_000 * 30) / 1e9
          end
          new(**opts.compact)
        end
      end

      attr_reader :heap_profiler, :snapshots, :errors, :windows_seen

      def initialize(sites: DEFAULTS[:sites], windows: DEFAULTS[:windows], snapshot_every: DEFAULTS[:snapshot_every],
                     min_windows: DEFAULTS[:min_windows], heap_profiler: nil)
        @max_sites = Options.integer("sites", sites, SITES_RANGE)
        @max_windows = Options.integer("windows", windows, WINDOWS_RANGE)
        raise TypeError, "fathom: snapshot_every must be a number of seconds" unless Numeric === snapshot_every

        @snapshot_every = snapshot_every.to_f
        @rules = Rules.new(min_windows: min_windows)
        @heap_profiler = heap_profiler
        reset
      end

      # The running HeapProfiler whose live samples the holder snapshot follows.
      def attach(heap_profiler)
        @heap_profiler = heap_profiler
        self
      end

      def start
        Notes.monitor = self
        self.class.current = self
        spawn
        self
      end

      # ---- Sinks

      def deliver(profile, mode:, from_ns: nil, until_ns: nil) # rubocop:disable Lint/UnusedMethodArgument
        return unless mode == :heap

        @lock.synchronize do
          @queue.shift while @queue.size >= QUEUE
          @queue << profile.bytes
          @ready.signal
        end
      end

      def stop(timeout: 5)
        thread = @lock.synchronize do
          @stopping = true
          @ready.signal
          @thread
        end
        thread&.join(timeout)
        Notes.monitor = nil if Notes.monitor.equal?(self)
        self.class.current = nil if self.class.current.equal?(self)
      end

      # A forked child's heap is its own from here on: new series, new
      # thread (Sinks calls it in the child).
      def after_fork_child
        reset
        spawn if self.class.current.equal?(self)
      end

      # ---- what the process carries and serves

      # Comment lines for the next heap window: the holders found.
      def notes
        records = @lock.synchronize { @records.values }
        return [] if records.empty?

        require "json" # here, not at load (lib/fathom/files/stdlib.rb)
        ["#{Window::HOLDERS_COMMENT}#{JSON.generate(records)}"]
      end

      # A heap profile's bytes with the leak verdicts as sample labels
      # (PushLabels), for the push client (Push::Client#heap_labels=).
      def push_labels(bytes)
        sites = analysis&.leaks&.map(&:key) || []
        return bytes if sites.empty?

        require_relative "push_labels"
        PushLabels.apply(bytes, sites)
      end

      # The latest Analysis (nil before the first window).
      def analysis
        @lock.synchronize { @analysis }
      end

      # Waits until every window delivered so far has been analysed (and
      # its snapshot taken), at most `timeout` seconds; true if it is.
      # For tests and benchmarks that flush windows themselves.
      def settle(timeout: 30)
        deadline = Monotonic.now + timeout
        @lock.synchronize do
          until @queue.empty? && !@busy
            left = deadline - Monotonic.now
            return false unless left.positive?

            @idle.wait(@lock, left)
          end
        end
        true
      end

      # The verdicts as data (Json.document), for /debug/fathom/leaks.
      def document
        analysis = @lock.synchronize { @analysis }
        doc = analysis ? Json.document([analysis]) : { "leak_found" => false, "processes" => [] }
        doc.merge("monitor" => stats)
      end

      def stats
        @lock.synchronize do
          { "windows_seen" => @windows_seen, "skipped" => @skipped, "errors" => @errors, "snapshots" => @snapshots,
            "last_error" => @last_error, "max_sites" => @max_sites, "max_windows" => @max_windows,
            "snapshot_every" => @snapshot_every }
        end
      end

      # Takes a holder snapshot now for `sites` ([[key, file, line], ...];
      # default: the current leaks) and keeps the records. Returns them.
      def explain(sites = nil)
        profiler = @heap_profiler or raise Fathom::Error, "fathom: no heap profiler is running for the holders"

        sites ||= @lock.synchronize { @analysis ? @analysis.leaks.map { |v| [v.key, v.file, v.line] } : [] }
        return [] if sites.empty?

        records = @explain_lock.synchronize { Holders.explain(profiler, sites) }
        @lock.synchronize do
          @snapshots += 1
          @last_snapshot = Monotonic.now
          records.each do |r|
            @records[r["site"]] = r
            @history.holders[r["site"]] = r
          end
          @records.shift while @records.size > @max_sites
        end
        records
      end

      # Processes one profile's bytes now (the thread's work; tests call it).
      def process(bytes)
        require_relative "../report"
        window = Window.from_profile(Report.decode(bytes), token: ProcessToken.get)
        analysis = @lock.synchronize do
          @history.add(window)
          @windows_seen += 1
          Analysis.new(@history, rules: @rules)
        end
        fresh = analysis.leaks.reject { |v| @announced[v.key] }
        unless fresh.empty?
          if snapshot_due?
            begin
              explain(fresh.map { |v| [v.key, v.file, v.line] })
              analysis = @lock.synchronize { Analysis.new(@history, rules: @rules) }
            rescue StandardError => e
              note_error(e)
            end
          end
          fresh_keys = fresh.to_h { |v| [v.key, true] }
          analysis.leaks.each do |v|
            next unless fresh_keys[v.key]

            @announced[v.key] = true
            line = Text.site_line(v, @history)
            Fathom.notice { "fathom: #{line}" }
          end
        end
        if analysis.process.outside_ruby? && !@announced[:process]
          @announced[:process] = true
          line = Text.native_line(analysis.process)
          Fathom.notice { "fathom: #{line}" }
        end
        @lock.synchronize { @analysis = analysis }
        analysis
      end

      private

      def reset
        @lock = Mutex.new
        @explain_lock = Mutex.new
        @ready = ConditionVariable.new
        @idle = ConditionVariable.new
        @busy = false
        @queue = []
        @history = History.new(max_sites: @max_sites, max_windows: @max_windows)
        @analysis = nil
        @records = {}
        @announced = {}
        @windows_seen = 0
        @skipped = 0
        @errors = 0
        @snapshots = 0
        @last_error = nil
        @last_snapshot = nil
        @stopping = false
        @thread = nil
      end

      def spawn
        @thread = Thread.new { run }
        @thread.name = "fathom-leaks"
        OwnThreads.add(@thread)
      end

      def run
        Thread.current.report_on_exception = false
        loop do
          bytes = @lock.synchronize do
            @ready.wait(@lock) while @queue.empty? && !@stopping
            break nil if @queue.empty?

            @busy = true
            @queue.shift
          end
          break unless bytes

          begin
            process(bytes)
          rescue StandardError => e
            note_error(e)
          ensure
            @lock.synchronize do
              @busy = false
              @idle.broadcast
            end
          end
        end
      end

      def snapshot_due?
        return false unless @heap_profiler && @snapshot_every.positive?

        @last_snapshot.nil? || Monotonic.now - @last_snapshot >= @snapshot_every
      end

      def note_error(error)
        first = @lock.synchronize do
          @errors += 1
          @last_error = "#{error.class}: #{error.message}"
          @errors == 1
        end
        Fathom.notice { "fathom: FATHOM_LEAKS: #{error.class}: #{error.message} (said once)" } if first
      end
    end
  end
end
