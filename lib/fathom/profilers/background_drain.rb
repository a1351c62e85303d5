# frozen_string_literal: true

require_relative "../process/internal_thread"

module Fathom
  module Profilers
    # A sleeping helper thread that calls one method of the native collector
    # under the profiler's lock at a fixed interval while the profiler runs:
    # the CPU profiler's drain of its signal ring, the GC profiler's poll of
    # Ruby's GC counters. Included after CollectorLifecycle; the including
    # class defines #background_work: [thread name, seconds between calls,
    # collector method], or nil when this profiler needs no thread.
    #
    # The thread is a Fathom InternalThread (no CPU or wall profile samples
    # it). Sleep releases the GVL, so between calls it costs nothing; when the
    # program keeps the GVL busy, Ruby hands it over at its 100 ms time slice.
    module BackgroundDrain
      def start
        super
        start_background
        self
      end

      # The collector stops first: joining the thread lets other threads run
      # (up to a GVL time slice each) and they must not be recorded after the
      # caller said stop. A call the thread makes meanwhile finds the
      # collector stopped and does nothing.
      def stop
        super
        stop_background
        self
      end

      # Threads do not survive fork: a running profiler gets a new one in
      # the child.
      def after_fork_child
        super
        @background = nil
        start_background
      end

      private

      def start_background
        name, interval, call = background_work
        return unless call && running?
        return if @background&.alive?

        collector = @collector
        lock = @lock
        @background = InternalThread.start(name) do
          loop do
            sleep(interval)
            lock.synchronize { collector.public_send(call) }
          end
        end
      end

      def stop_background
        thread = @background
        @background = nil
        return unless thread

        thread.kill
        thread.join unless thread == Thread.current
      end
    end
  end
end
