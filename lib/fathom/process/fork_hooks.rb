# frozen_string_literal: true

require_relative "../notice"
require_relative "../native"

module Fathom
  # Keeps running profilers and flushers alive across fork.
  #
  # Ruby 3.1+ routes every fork (Kernel#fork, Process.fork, IO.popen("-"), ...)
  # through Process._fork, so prepending an override of it to Process's
  # singleton class sees them all — except Process.daemon, which forks in C
  # without calling _fork; it gets its own override (the process that
  # returns from it is the child). In the child, each registered object gets
  # #after_fork_child, in registration order (profilers are normally started,
  # and so registered, before the flushers that drain them).
  #
  # Objects register when they start and unregister when they stop, so the
  # registry only ever holds live objects and needs no weak references.
  #
  # Before any of them, the child resets the native side's process-wide
  # "in progress" state (Native.after_fork_child: a heap dump or retention
  # snapshot that another thread was waiting for, a heap flush's census with
  # GC off): the thread that would end it was not copied, and the child
  # would keep it for life ("another heap dump is in progress" on every
  # Fathom.heap_dump there). What sets such state calls ForkHooks.install
  # first, so this runs in any process forked while it is set.
  module ForkHooks
    @registry = []
    @lock = Mutex.new

    class << self
      def register(obj)
        install
        @lock.synchronize { @registry << obj unless @registry.any? { |o| o.equal?(obj) } }
        obj
      end

      def unregister(obj)
        @lock.synchronize { @registry.reject! { |o| o.equal?(obj) } }
        obj
      end

      def registered
        @lock.synchronize { @registry.dup }
      end

      # Called in the child right after fork, with only the forking thread alive.
      def run_child_hooks
        Native.after_fork_child if NativeLoader.available?
        # The lock may have been held by a thread that no longer exists here.
        @lock = Mutex.new
        @registry.dup.each do |obj|
          obj.after_fork_child
        rescue StandardError, ScriptError => e
          # A child that cannot keep profiling must still run normally.
          Fathom.notice { "fathom: #{obj.class} could not resume after fork: #{e.class}: #{e.message}" }
        end
      end

      def installed?
        @installed == true
      end

      # Prepends the hooks to Process (once): registering does it too.
      def install
        return if @installed

        @installed = true
        Process.singleton_class.prepend(ProcessExtension)
      end
    end

    # Prepended to Process.singleton_class. The native side pauses the
    # sampling timer thread around fork, so that no thread of ours holds a
    # lock (ours, or malloc's) at the moment the process is copied.
    module ProcessExtension
      def _fork
        Native.before_fork if NativeLoader.available?
        pid = super
        if pid.zero?
          ForkHooks.run_child_hooks
        elsif NativeLoader.available?
          Native.after_fork_parent
        end
        pid
      rescue StandardError
        Native.after_fork_parent if NativeLoader.available? # fork itself failed
        raise
      end

      # Without this a daemonized server keeps `running? == true` with a dead
      # timer thread (threads do not survive fork) and writes empty profiles.
      def daemon(...)
        Native.before_fork if NativeLoader.available?
        begin
          result = super
        rescue StandardError
          Native.after_fork_parent if NativeLoader.available? # daemon failed: still the parent
          raise
        end
        ForkHooks.run_child_hooks
        result
      end
    end
  end
end
