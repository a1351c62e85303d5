# frozen_string_literal: true

# Loaded into programs started by `fathom run` (through RUBYOPT, so before the
# program's own code). It profiles only the process `fathom run` exec'ed into
# (FATHOM_PID: exec keeps the pid) and, through Fathom's fork hooks, that
# process's forked children; any other Ruby process that inherits RUBYOPT
# (system("ruby ..."), bundler subprocesses...) loads this file and does nothing.
#
# Settings come from FATHOM_MODE (comma-separated: heap, gc, retention),
# FATHOM_OUT, FATHOM_FORCE, FATHOM_FORMAT, FATHOM_EXACT, FATHOM_CENSUS, FATHOM_INTERVAL,
# FATHOM_MAX_DEPTH, FATHOM_NATIVE, FATHOM_COALESCE, FATHOM_STRING_CONTENTS; the CLI has validated them. The run is a
# Fathom::Session, as in Fathom.profile: started here, finished at exit.
# Whatever goes wrong here is reported on $stderr (Fathom.notice) and never
# changes what the program does or its exit status.
module Fathom
  module Autorun
    class << self
      def target_process?
        ENV["FATHOM_PID"] == Process.pid.to_s
      end

      def start
        # First: it reports a failure to load the rest, and it remembers
        # what descriptor 2 is before the program can change it.
        require_relative "notice"
        @origin_pid = Process.pid
        # Registered before the program is loaded, so that (at_exit handlers
        # running in reverse order) it runs after all of the program's own.
        at_exit { finish }
        # exit! skips at_exit handlers: the profile is written first.
        ExitBang.install
        require_relative "../fathom"
        require_relative "always_on/settings"
        modes = Modes.parse(ENV.fetch("FATHOM_MODE", Modes::DEFAULT.to_s), "FATHOM_MODE")
        @session = Session.new(modes, **AlwaysOn::Settings.profilers(modes, ENV))
        out = ENV["FATHOM_OUT"]
        @out = out && !out.empty? ? out : nil
        @overwrite = ENV["FATHOM_FORCE"] == "1"
        @session.start
      rescue StandardError, ScriptError => e
        @session&.stop
        @session = nil
        warn_error("could not start profiling; the program runs unprofiled", e)
      end

      # Stops, flushes and writes each profile: the origin process writes the
      # paths given, a forked child the same with its pid inserted.
      def finish
        session = @session or return
        @session = nil
        session.stop
        paths = session.paths(@out, pid: Process.pid == @origin_pid ? nil : Process.pid)
        profiles = session.finish { |mode, e| warn_error("could not take the #{mode} profile", e) }
        session.outputs(profiles, paths).each { |label, profile, path| write_one(label, profile, path) }
      rescue StandardError, ScriptError => e
        warn_error("could not finish profiling", e)
      end

      # Called by exit! (and Process.exit!) before it ends the process
      # without at_exit handlers: the profiles are written as at a normal
      # exit, then exit! does what it does. A program that calls exit! got
      # no profile and no word before (issue 43, defect 5).
      def finish_before_exit!
        return unless @session

        Fathom.notice { "fathom: the program called exit!, which skips at_exit handlers: writing its profiles first" }
        finish
      end

      private

      def write_one(mode, profile, path)
        profile.write(path, overwrite: @overwrite)
        # Built inside the notice: a message that fails must not turn a
        # written profile into "could not write".
        Fathom.notice { "fathom: wrote #{mode} profile to #{path} (#{summary(profile)})" }
        # One notice a line: a notice is one line, its newlines escaped.
        return unless profile.stats[:sites]

        lines = begin
          Report::SiteRetention.new(profile.stats[:sites]).to_s.lines
        rescue StandardError => e
          ["fathom: the retention profile's sites could not be printed (#{e.class})"]
        end
        lines.each { |line| Fathom.notice { line } }
      rescue StandardError, ScriptError => e
        warn_error("could not write the #{mode} profile", e)
      end

      def summary(profile)
        combined = profile.stats[:combined]
        return combined.map { |mode, stats| "#{mode}: #{part_summary(mode == :wall ? :cpu : mode, stats)}" }.join("; ") if combined

        part_summary(profile.kind, profile.stats)
      end

      def part_summary(kind, s)
        case kind
        when :gc
          s[:source] == :counters ? "#{s[:cycles]} GCs, from Ruby's GC counters" : "#{s[:cycles]} GCs, #{s[:steps]} steps"
        when :retention then "#{s[:objects]} objects, GVL held #{Options.format_ns(s[:gvl_held_ns])}"
        when :cpu then "#{s[:window_samples]} #{s[:mode]} samples of #{s[:window_threads]} threads, #{s[:dropped]} dropped"
        else "#{s[:samples]} samples, #{s[:live_samples]} live"
        end
      end

      def warn_error(what, error)
        Fathom.notice { "fathom: #{what}: #{error.class}: #{error.message}" }
      end
    end
  end
end

module Fathom
  module Autorun
    # Kernel#exit!, Kernel.exit! and Process.exit! finish the profiles
    # first (Autorun.finish_before_exit!), then exit as they would.
    #
    # The instance method is intercepted in Object (included: between
    # Object and Kernel), not with Kernel.prepend: on Ruby 3.3 a module
    # prepended to Kernel makes rb_profile_frames name every Kernel
    # instance method as a singleton one ("Kernel.sleep" for a plain
    # `sleep`; 3.1 and 3.4 read "Kernel#sleep"), so profiling changed the
    # names it reported. What is not an Object (a BasicObject that includes
    # Kernel) calls exit! unseen: no profile, as for exit! before.
    module ExitBang
      module Instance
        private

        def exit!(*args)
          Fathom::Autorun.finish_before_exit!
          super
        end
      end

      module Singleton
        def exit!(*args)
          Fathom::Autorun.finish_before_exit!
          super
        end
      end

      def self.install
        Object.include(Instance)
        Kernel.singleton_class.prepend(Singleton)
        Process.singleton_class.prepend(Singleton)
      end
    end
  end
end

Fathom::Autorun.start if Fathom::Autorun.target_process?
