# frozen_string_literal: true

# Always-on profiling from the environment, with no code change:
#
#   RUBYOPT=-rfathom/setup FATHOM_MODE=cpu,heap,gc FATHOM_DIR=/var/tmp/fathom FATHOM_EVERY=60s bundle exec puma
#
#   FATHOM_MODE      heap, gc, cpu or wall, comma-separated (not cpu and wall together; default heap)
#   FATHOM_DIR       where the files go (required unless pushing or sinks are given; created if missing)
#   FATHOM_PUSH      send each profile to Pyroscope or Parca instead of (or besides) files:
#                    pyroscope://host:4040, https://host, parca://host:7070 (Fathom::Push;
#                    FATHOM_SERVICE, FATHOM_LABELS, FATHOM_PUSH_TOKEN/_USER/_PASSWORD/_TENANT)
#   FATHOM_EVERY     how often a file is written (default 60s; "2s", "500ms", 30)
#   FATHOM_KEEP      at most this many files per process and mode (default 50; Rotation)
#   FATHOM_KEEP_MB   at most this many MB of Fathom's files in FATHOM_DIR (default 100)
#   FATHOM_INTERVAL, FATHOM_MAX_DEPTH, FATHOM_EXACT, FATHOM_CENSUS, FATHOM_GC_SOURCE,
#   FATHOM_COALESCE, FATHOM_FORMAT   the profilers' options, as for `fathom run`
#   FATHOM_LEAKS=1   keep leak verdicts in the process (Fathom::Leaks::Monitor: one log line per
#                    leak, a holder snapshot, /debug/fathom/leaks); FATHOM_LEAKS_SITES,
#                    FATHOM_LEAKS_WINDOWS, FATHOM_LEAKS_SNAPSHOT_EVERY, FATHOM_LEAKS_MIN_WINDOWS
#
# Every Ruby process that loads this (RUBYOPT is inherited) profiles itself
# into the same directory; the file names carry the pid. Forked children
# (puma workers) keep profiling and write their own files. At exit, SIGTERM
# included, each mode writes its last file; files are written atomically,
# so a killed process leaves no partial profile (only a hidden temporary
# file that the next start removes). A bad setting is reported on stderr and
# the program runs unprofiled: this file never stops an app from booting.
module Fathom
  class AlwaysOn
    module Setup
      @always_on = nil

      class << self
        # {mode => running profiler}; empty when not started.
        def profilers
          @always_on ? @always_on.profilers : {}
        end

        attr_reader :always_on

        # sinks: AlwaysOn's (a push client); with them FATHOM_DIR is optional
        # and no file is written without it.
        def start(env = ENV, sinks: nil)
          return @always_on if @always_on

          require_relative "../api"
          require_relative "always_on"
          require_relative "settings"
          sinks = push_sinks(env) if sinks.nil?
          settings = Settings.always_on(env, require_dir: sinks.nil? || sinks.empty?)
          # FATHOM_LEAKS=1: the leak verdicts kept in the process, a sink of
          # the heap windows (Leaks::Monitor).
          monitor = leaks_monitor(env, settings[:modes])
          if monitor
            # Pushed heap windows carry the verdicts (Leaks::PushLabels).
            sinks&.each { |sink| sink.heap_labels = monitor.method(:push_labels) if sink.respond_to?(:heap_labels=) }
            sinks = [*sinks, monitor]
          end
          @always_on = AlwaysOn.new(**settings, sinks: sinks).start
          monitor&.attach(@always_on.profilers[:heap])&.start
          @pid = Process.pid
          at_exit { stop }
          where = [@always_on.dir, *@always_on.sinks.list.map { |s| s.class.name }].compact.join(", ")
          Fathom.notice { "fathom: always-on #{@always_on.profilers.keys.join(",")} profiling into #{where}" }
          @always_on
        rescue StandardError, ScriptError => e
          @always_on = nil
          sinks&.each { |sink| sink.stop(timeout: 0) rescue nil } # rubocop:disable Style/RescueModifier -- already failing
          require_relative "../notice"
          Fathom.notice { "fathom/setup: not profiling: #{e.class}: #{e.message}" }
          nil
        end

        # FATHOM_LEAKS=1's monitor (not started), nil without it;
        # ArgumentError naming the variable for a bad setting.
        def leaks_monitor(env, modes)
          return nil if env["FATHOM_LEAKS"].to_s.strip.empty?

          require_relative "../leaks/monitor"
          monitor = Leaks::Monitor.from_env(env) or return nil
          raise ArgumentError, "fathom: FATHOM_LEAKS=1 needs heap in FATHOM_MODE (got #{modes.join(",")})" unless modes.include?(:heap)

          monitor
        end

        # FATHOM_PUSH's client, started, as AlwaysOn's one sink; nil without it.
        def push_sinks(env)
          require_relative "../push/push"
          client = Push.from_env(env) or return nil
          [client.start]
        end

        def stop
          always_on = @always_on or return
          @always_on = nil
          always_on.stop
        rescue StandardError => e
          Fathom.notice { "fathom/setup: stopping: #{e.class}: #{e.message}" }
        end
      end
    end
  end
end

Fathom::AlwaysOn::Setup.start unless ENV["FATHOM_SETUP"] == "0"
