# frozen_string_literal: true

module Fathom
  # The threads Fathom starts (its helper threads, the periodic flushers,
  # the endpoints' profile threads). A retention snapshot sets them apart
  # with the rest of Fathom's own objects: what only they hold is charged
  # to nothing (docs/internals/retention.md, "Fathom's own objects and Ruby
  # internals"). Wider than InternalThread, which lists only the threads no
  # CPU profile samples (the flusher's work is profiling's real cost and
  # stays visible there).
  #
  # Ruby 3.2+: an ObjectSpace::WeakMap (an ended thread drops out). Ruby
  # 3.1: a plain Hash under a Mutex, ended threads pruned at each add: 3.1's
  # WeakMap (the old finalizer-based one) crashed the process in #[]= (SEGV)
  # in a CI run of test/crash/rack_concurrency_test.rb, threads adding while
  # others allocate. On 3.1 an ended thread stays listed until the next add;
  # a snapshot counts it among Fathom's own objects either way. (The Hash on
  # 3.3 left the CPU drain thread charged to the program in
  # retention_charging_test; not understood yet, so 3.2+ keeps the WeakMap.)
  module OwnThreads
    WEAK = RUBY_VERSION >= "3.2"
    REGISTRY = WEAK ? ObjectSpace::WeakMap.new : {}.compare_by_identity
    LOCK = Mutex.new

    module_function

    def add(thread)
      if WEAK
        REGISTRY[thread] = true
      else
        LOCK.synchronize do
          REGISTRY.delete_if { |t, _| !t.alive? }
          REGISTRY[thread] = true
        end
      end
      thread
    end

    # The live ones.
    def live
      return Thread.list.select { |t| REGISTRY.key?(t) } if WEAK

      LOCK.synchronize { REGISTRY.keys }.select(&:alive?)
    end
  end
end
