# frozen_string_literal: true

require_relative "../notice"

module Fathom
  # Writes always-on profiles before exec. exec replaces the process image
  # without running at_exit handlers, so the part of the run after the
  # last periodic file was lost (puma's USR2 hot restart execs itself,
  # same pid). Prepended to Kernel (exec called as a method of any object),
  # Kernel's singleton (Kernel.exec) and Process's (Process.exec), the way
  # ForkHooks prepends Process._fork; installed when always-on starts.
  # The hook never raises: a profile that cannot be written is said through
  # Fathom.notice and exec goes on. Profiling keeps running through the
  # hook, so an exec that fails (ENOENT) leaves it as it was; the new image
  # starts with a new ProcessToken, so its files never replace these.
  module ExecHooks
    @installed = false

    class << self
      def install
        return if @installed

        @installed = true
        ::Kernel.prepend(KernelExtension)
        ::Kernel.singleton_class.prepend(SingletonExtension)
        ::Process.singleton_class.prepend(SingletonExtension)
      end

      def installed?
        @installed
      end

      # Each running AlwaysOn writes its file now.
      def before_exec
        # AlwaysOn is also the namespace of Settings, Setup...: it may be
        # open without always_on.rb (the Railtie, fathom run's autorun).
        return unless defined?(Fathom::AlwaysOn) && Fathom::AlwaysOn.respond_to?(:running)

        Fathom::AlwaysOn.running.each(&:before_exec)
      rescue Exception => e # rubocop:disable Lint/RescueException -- exec must happen, whatever went wrong here
        raise if e.is_a?(SignalException) || e.is_a?(SystemExit)

        Fathom.notice { "fathom: writing profiles before exec: #{e.class}: #{e.message}" }
      end
    end

    # Kernel#exec is private (called without a receiver).
    module KernelExtension
      private

      def exec(...)
        ExecHooks.before_exec
        super
      end
    end

    # Kernel.exec and Process.exec are public.
    module SingletonExtension
      def exec(...)
        ExecHooks.before_exec
        super
      end
    end
  end
end
