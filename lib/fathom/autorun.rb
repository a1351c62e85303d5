# frozen_string_literal: true

# Loaded into programs started by `fathom run` (through RUBYOPT, so before the
# program's own code). It profiles only the process `fathom run` exec'ed into
# (FATHOM_PID: exec keeps the pid) and, through Fathom's fork hooks, that
# process's forked children; any other Ruby process that inherits RUBYOPT
# (system("ruby ..."), bundler subprocesses...) loads this file and does nothing.
#
# Settings come from FATHOM_MODE, FATHOM_OUT, FATHOM_EXACT, FATHOM_INTERVAL,
# FATHOM_MAX_DEPTH. Whatever goes wrong here is reported on $stderr and never
# changes what the program does or its exit status.
module Fathom
  module Autorun
    DEFAULT_OUT = "fathom-heap.pb.gz"

    class << self
      def target_process?
        ENV["FATHOM_PID"] == Process.pid.to_s
      end

      def start
        @origin_pid = Process.pid
        @out = File.expand_path(ENV.fetch("FATHOM_OUT", DEFAULT_OUT))
        # Registered before the program is loaded, so that (at_exit handlers
        # running in reverse order) it runs after all of the program's own.
        at_exit { finish }
        require_relative "../fathom"
        @profiler = MemoryProfiler.new(**settings).start
      rescue StandardError, ScriptError => e
        @profiler = nil
        warn_error("could not start profiling; the program runs unprofiled", e)
      end

      # Stops, flushes and writes the profile: the origin process writes
      # FATHOM_OUT, a forked child writes FATHOM_OUT with its pid inserted.
      def finish
        profiler = @profiler or return
        @profiler = nil
        path = Process.pid == @origin_pid ? @out : path_for_pid(@out, Process.pid)
        profiler.stop
        profile = profiler.flush(gc: true)
        profile.write(path)
        stats = profile.stats
        $stderr.puts "fathom: wrote heap profile to #{path} (#{stats[:samples]} samples, #{stats[:live_samples]} live)"
      rescue StandardError, ScriptError => e
        warn_error("could not write the profile", e)
      end

      # heap.pb.gz -> heap.<pid>.pb.gz; profile.out -> profile.<pid>.out; prof -> prof.<pid>
      def path_for_pid(path, pid)
        dir = File.dirname(path)
        base = File.basename(path)
        ext = base.end_with?(".pb.gz") && base != ".pb.gz" ? ".pb.gz" : File.extname(base)
        File.join(dir, "#{base.delete_suffix(ext)}.#{pid}#{ext}")
      end

      def settings
        mode = ENV.fetch("FATHOM_MODE", "heap")
        # Only heap exists today; Fathom::PROFILERS lists the supported modes.
        Options.one_of("FATHOM_MODE", mode, [:heap])
        {
          exact: Options.parse_boolean("FATHOM_EXACT", ENV.fetch("FATHOM_EXACT", "0")),
          interval: "#{Options.duration_ns("FATHOM_INTERVAL", ENV.fetch("FATHOM_INTERVAL", "10ms"))}ns",
          max_depth: Options.parse_integer("FATHOM_MAX_DEPTH", ENV.fetch("FATHOM_MAX_DEPTH", "128"),
                                           Options::MAX_DEPTH_RANGE),
        }
      end

      private

      def warn_error(what, error)
        $stderr.puts "fathom: #{what}: #{error.class}: #{error.message}"
      end
    end
  end
end

Fathom::Autorun.start if Fathom::Autorun.target_process?
