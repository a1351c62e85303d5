# frozen_string_literal: true

require_relative "../notice"
require_relative "../options"
require_relative "../process/fork_hooks"
require_relative "../monotonic"

module Fathom
  class AlwaysOn
    # Where always-on profiles go besides (or instead of) files: AlwaysOn's
    # `sinks:`, each an object with
    #
    #   deliver(profile, mode:, from_ns:, until_ns:)  every profile flushed: the
    #       periodic ones, the last one at stop/exec/SIGTERM, and the windows
    #       the Rack endpoints take; from/until are the CLOCK_REALTIME ns of
    #       the window it covers. Called on the flusher's thread (or the
    #       endpoint's) under that mode's flush lock: return quickly (queue
    #       the work; a push client sends from a thread of its own).
    #   stop(timeout:)   after the last flush (AlwaysOn#stop): send what is
    #       queued, for at most `timeout` seconds.
    #   after_fork_child   in a forked child, before its first delivery: the
    #       parent's threads and queue are not the child's.
    #
    # and optionally before_exec(timeout:) (send what is queued: exec ends
    # the process image without at_exit). A sink that raises costs its own
    # delivery only: the error is counted (#errors) and said once per sink
    # through Fathom.notice; the flusher and the other sinks go on.
    class Sinks
      METHODS = %i[deliver stop after_fork_child].freeze
      # AlwaysOn#stop's default bound on the sinks' stop, in seconds.
      STOP_TIMEOUT = 5.0

      attr_reader :list

      def initialize(sinks)
        list = NilClass === sinks ? [] : sinks
        raise TypeError, "fathom: sinks must be an Array of sinks, got #{Options.describe(sinks)}" unless Array === list

        list.each do |sink|
          missing = METHODS.reject { |m| sink.respond_to?(m) }
          next if missing.empty?

          raise TypeError, "fathom: sinks must respond to #{METHODS.join(", ")}; #{Options.describe(sink)} lacks #{missing.join(", ")}"
        end
        @list = list.dup.freeze
        @lock = Mutex.new
        @errors = Hash.new(0)
      end

      def empty? = @list.empty?

      # Errors raised by each sink: {sink => count}, for stats and tests.
      def errors
        @lock.synchronize { @errors.dup }
      end

      # A PeriodicFlusher's deliver: for `mode`.
      def for_mode(mode)
        ->(profile, from_ns, until_ns) { deliver(profile, mode, from_ns, until_ns) }
      end

      def deliver(profile, mode, from_ns, until_ns)
        @list.each do |sink|
          sink.deliver(profile, mode: mode, from_ns: from_ns, until_ns: until_ns)
        rescue StandardError => e
          failed(sink, "#{mode} profile", e)
        end
      end

      def start
        ForkHooks.register(self) unless empty?
        self
      end

      # Each sink's stop, all within `timeout` seconds in total: a sink that
      # overruns its share is left behind (its thread keeps running until
      # the process exits), so shutdown never waits longer than that.
      def stop(timeout: STOP_TIMEOUT)
        ForkHooks.unregister(self)
        deadline = Monotonic.now + timeout
        @list.each { |sink| bounded(sink, :stop, deadline) }
      end

      # Before exec (AlwaysOn#before_exec), for the sinks that can drain.
      def before_exec(timeout: STOP_TIMEOUT)
        deadline = Monotonic.now + timeout
        @list.each { |sink| bounded(sink, :before_exec, deadline) if sink.respond_to?(:before_exec) }
      end

      # ForkHooks, in the child: a new lock and counts; each sink's own hook.
      def after_fork_child
        @lock = Mutex.new
        @errors = Hash.new(0)
        @list.each do |sink|
          sink.after_fork_child
        rescue StandardError => e
          failed(sink, "after_fork_child", e)
        end
      end

      private

      # Runs sink.<verb>(timeout:) on a thread of its own and waits for it
      # until the deadline, no longer: a sink that ignores its timeout (a
      # hung connect) must not hang the process's exit.
      def bounded(sink, verb, deadline)
        left = [deadline - Monotonic.now, 0.0].max
        thread = Thread.new do
          Thread.current.report_on_exception = false
          sink.public_send(verb, timeout: left)
        end
        thread.name = "fathom-sink-#{verb}"
        if thread.join(left + 0.1)
          thread.value # its exception, if it raised, is counted below
        else
          Fathom.notice { "fathom: #{label(sink)}##{verb} did not finish within #{left.round(1)}s; not waiting for it" }
        end
      rescue StandardError => e
        failed(sink, verb.to_s, e)
      end

      def failed(sink, what, error)
        first = @lock.synchronize { (@errors[sink] += 1) == 1 }
        return unless first

        Fathom.notice do
          "fathom: sink #{label(sink)} failed on #{what}: #{error.class}: #{error.message} " \
            "(said once; Fathom::AlwaysOn#sink_errors counts them)"
        end
      end

      # A sink's class: its #inspect may be long or hold a token.
      def label(sink)
        Kernel.instance_method(:class).bind_call(sink).to_s
      end
    end
  end
end
