# frozen_string_literal: true

require_relative "../native"
require_relative "own_threads"

module Fathom
  # Fathom's own sleeping helper threads (the CPU profiler's drainer, the GC
  # profiler's counters poller). Each marks itself before its body runs, so
  # no CPU or wall profile, started before or after, samples it: a thread
  # that sleeps in a loop would otherwise fill a wall profile with a track
  # of "blocked" that is Fathom's, not the program's. It unmarks itself as
  # it ends (also when killed), because Ruby 3.1 reuses a finished thread's
  # native thread for the next Ruby thread. The periodic flusher is not one
  # of these: the work it does is profiling's real cost and stays visible.
  module InternalThread
    module_function

    # Starts the thread and returns it once it is marked.
    def start(name, &body)
      marked = Queue.new
      thread = Thread.new do
        Native.internal_thread(true)
        marked << true
        body.call
      ensure
        Native.internal_thread(false)
      end
      thread.name = name
      OwnThreads.add(thread)
      # Never report an exception from these threads (their bodies rescue
      # nothing: a collector call raises only on a state that cannot happen).
      thread.report_on_exception = false
      marked.pop
      thread
    end
  end
end
