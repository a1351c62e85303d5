# frozen_string_literal: true

require_relative "../process/fork_hooks"

module Fathom
  class AlwaysOn
    # Always-on profiling in a pre-forking server's workers, not in its master.
    # puma in cluster mode with preload_app! (its default with 2+ workers)
    # boots the app, Railtie included, in the master, then forks the workers.
    # Started there, always-on profiling (1) made puma warn "Detected 2
    # Thread(s) started in app boot: ...fathom-flusher" and (2) had the idle
    # master write a file every interval, eating into FATHOM_KEEP. So in that
    # master nothing starts; each worker starts its own right after fork
    # (Process._fork, ForkHooks), before it serves a request. The master's
    # boot-time allocations are not profiled: they are the workers' shared,
    # copy-on-write heap, which the workers' retention snapshots still see.
    module StartInWorkers
      module_function

      # Whether this process is puma's master preloading the app for its
      # workers. Puma.cli_config is what puma's CLI exports for apps to read
      # (puma/cli.rb); without it (another server, `rails runner`) false.
      def puma_preloading_master?
        return false unless defined?(::Puma) && ::Puma.respond_to?(:cli_config)

        config = ::Puma.cli_config or return false
        options = config.options
        options[:workers].to_i.positive? && options[:preload_app] ? true : false
      rescue StandardError
        false
      end

      # Runs the block in each child forked from now on, once, right after
      # the fork (not again in that child's own children).
      def after_fork(&block)
        ForkHooks.register(Hook.new(block))
      end

      # A ForkHooks entry that runs its block in the child.
      class Hook
        def initialize(block)
          @block = block
        end

        def after_fork_child
          ForkHooks.unregister(self)
          @block.call
        end
      end
    end
  end
end
