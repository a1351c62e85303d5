# frozen_string_literal: true

module Fathom
  # The threads Fathom starts (its helper threads, the periodic flushers,
  # the endpoints' profile threads). A retention snapshot sets them apart
  # with the rest of Fathom's own objects: what only they hold is charged
  # to nothing (IMPLEMENTATION.md, "Fathom's own objects and Ruby
  # internals"). Wider than InternalThread, which lists only the threads no
  # CPU profile samples (the flusher's work is profiling's real cost and
  # stays visible there). Weak: an ended thread drops out.
  module OwnThreads
    REGISTRY = ObjectSpace::WeakMap.new

    module_function

    def add(thread)
      REGISTRY[thread] = true
      thread
    end

    # The live ones.
    def live
      Thread.list.select { |t| REGISTRY.key?(t) }
    end
  end
end
