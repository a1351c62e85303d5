# frozen_string_literal: true

# Loaded into programs started by `fathom run` (through RUBYOPT, so before the
# program's own code). It profiles only the process `fathom run` exec'ed into
# (FATHOM_PID: exec keeps the pid) and, through Fathom's fork hooks, that
# process's forked children; any other Ruby process that inherits RUBYOPT
# (system("ruby ..."), bundler subprocesses...) loads this file and does nothing.
#
# Settings come from FATHOM_MODE (comma-separated: heap, gc, retention),
# FATHOM_OUT, FATHOM_FORMAT, FATHOM_EXACT, FATHOM_INTERVAL, FATHOM_MAX_DEPTH,
# FATHOM_COALESCE. Whatever goes wrong here is reported on $stderr and never
# changes what the program does or its exit status.
module Fathom
  module Autorun
    MODES = %i[heap gc retention].freeze

    class << self
      def target_process?
        ENV["FATHOM_PID"] == Process.pid.to_s
      end

      def start
        @origin_pid = Process.pid
        # Registered before the program is loaded, so that (at_exit handlers
        # running in reverse order) it runs after all of the program's own.
        at_exit { finish }
        require_relative "../fathom"
        @modes = parse_modes(ENV.fetch("FATHOM_MODE", "heap"))
        @format = Options.one_of("FATHOM_FORMAT", ENV.fetch("FATHOM_FORMAT", "pprof"), GcProfiler::FORMATS)
        out = ENV["FATHOM_OUT"]
        @paths = OutputPaths.for_modes(out && !out.empty? ? out : nil, @modes, format: @format)
        # The retention snapshot is taken at exit; it runs nothing meanwhile.
        @profilers = (@modes - [:retention]).to_h { |mode| [mode, build(mode)] }
        @profilers.each_value(&:start)
      rescue StandardError, ScriptError => e
        stop_started
        @profilers = nil
        warn_error("could not start profiling; the program runs unprofiled", e)
      end

      # Stops, flushes and writes each profile: the origin process writes the
      # paths given, a forked child the same with its pid inserted.
      def finish
        profilers = @profilers or return
        @profilers = nil
        profilers.each_value(&:stop)
        heap = profilers[:heap]
        # Retention first: explaining the heap's sites needs its live records.
        @modes.sort_by { |m| m == :retention ? 0 : 1 }.each do |mode|
          path = Process.pid == @origin_pid ? @paths.fetch(mode) : path_for_pid(@paths.fetch(mode), Process.pid)
          write_one(mode, profilers[mode], path, heap)
        end
      end

      # heap.pb.gz -> heap.<pid>.pb.gz; profile.out -> profile.<pid>.out; prof -> prof.<pid>
      def path_for_pid(path, pid)
        dir = File.dirname(path)
        base = File.basename(path)
        ext = OutputPaths::PROFILE_EXTENSIONS.find { |e| base.end_with?(e) && base != e } || File.extname(base)
        File.join(dir, "#{base.delete_suffix(ext)}.#{pid}#{ext}")
      end

      def parse_modes(text)
        modes = text.split(",").map(&:strip).reject(&:empty?)
        raise ArgumentError, "fathom: FATHOM_MODE must name at least one of #{MODES.join(", ")}" if modes.empty?

        modes.map { |m| Options.one_of("FATHOM_MODE", m, MODES) }.uniq
      end

      def settings(mode)
        case mode
        when :heap
          {
            exact: Options.parse_boolean("FATHOM_EXACT", ENV.fetch("FATHOM_EXACT", "0")),
            interval: "#{Options.duration_ns("FATHOM_INTERVAL", ENV.fetch("FATHOM_INTERVAL", "10ms"))}ns",
            max_depth: Options.parse_integer("FATHOM_MAX_DEPTH", ENV.fetch("FATHOM_MAX_DEPTH", "128"),
                                             Options::MAX_DEPTH_RANGE),
          }
        when :gc
          coalesce = ENV.fetch("FATHOM_COALESCE", "10ms")
          { format: @format, coalesce: coalesce.strip == "0" ? 0 : coalesce }
        end
      end

      private

      def build(mode)
        PROFILERS.fetch(mode).new(**settings(mode))
      end

      def stop_started
        @profilers&.each_value { |p| p.stop if p.running? }
      rescue StandardError
        nil
      end

      def write_one(mode, profiler, path, heap)
        if mode == :retention
          # With heap: explain its top sites (before the heap flush, which
          # ends the records); retention comes last in MODES order otherwise.
          snapshot = heap ? Retention.explain_sites(heap) : Fathom.retention_snapshot
          snapshot.write(path)
          $stderr.puts "fathom: wrote retention profile to #{path} (#{snapshot.stats[:objects]} objects, " \
                       "GVL held #{Options.format_ns(snapshot.stats[:gvl_held_ns])})"
          $stderr.print Report::SiteRetention.new(snapshot.stats[:sites]).to_s if snapshot.stats[:sites]
          return
        end
        profile = profiler.flush(gc: true)
        profile.write(path)
        $stderr.puts "fathom: wrote #{mode} profile to #{path} (#{summary(profile)})"
      rescue StandardError, ScriptError => e
        warn_error("could not write the #{mode} profile", e)
      end

      def summary(profile)
        s = profile.stats
        profile.kind == :gc ? "#{s[:cycles]} GCs, #{s[:steps]} steps" : "#{s[:samples]} samples, #{s[:live_samples]} live"
      end

      def warn_error(what, error)
        $stderr.puts "fathom: #{what}: #{error.class}: #{error.message}"
      end
    end
  end
end

Fathom::Autorun.start if Fathom::Autorun.target_process?
