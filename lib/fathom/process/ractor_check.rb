# frozen_string_literal: true

require_relative "../error"
require_relative "../native"
require_relative "../notice"

module Fathom
  # Fathom profiles the main Ractor only. Other Ractors run Ruby in
  # parallel, outside the GVL the collectors rely on, and on Ruby 3.1.0–3.1.3
  # any NEWOBJ or GC hook crashes the process as soon as another Ractor
  # allocates (Ruby bug #18464), inside Ruby, before our hook is called. So:
  #  - starting a profiler or a retention snapshot while Ractors run raises;
  #  - Ractor.new first stops every running profiler (its hooks removed, what
  #    it collected kept) and says so once;
  #  - the native hooks also ignore any thread of another Ractor
  #    (ext/fathom/ruby/runtime/ractor_guard.h), for Ractors started behind our back
  #    (through a Method taken before Ractor.new was wrapped);
  #  - each profile says whether Ractors cut it short: stats[:ractors].
  module RactorCheck
    @running = []
    @lock = Mutex.new
    @installed = false

    # Prepended to Ractor's singleton class.
    module StopProfilersFirst
      def new(...)
        RactorCheck.stop_profilers
        super
      end
    end

    class << self
      def ractors_running?
        defined?(::Ractor) && ::Ractor.respond_to?(:count) && ::Ractor.count > 1
      end

      # what: the API refusing, e.g. "Fathom::GcProfiler#start".
      def refuse_if_running!(what)
        return unless ractors_running?

        raise Fathom::Error, "fathom: #{what} cannot start while Ractors are running " \
                             "(#{::Ractor.count - 1} besides the main one): Fathom profiles the main Ractor only"
      end

      # A profiler started (it is stopped if a Ractor is created).
      def track(profiler)
        @lock.synchronize { @running << profiler unless @running.any? { |p| p.equal?(profiler) } }
      end

      def untrack(profiler)
        @lock.synchronize { @running.reject! { |p| p.equal?(profiler) } }
      end

      def stop_profilers
        stopped = @lock.synchronize { @running.dup }
        return if stopped.empty?

        stopped.each(&:stop_for_ractor)
        names = stopped.map { |p| p.class.name }.uniq.join(", ")
        Fathom.notice("fathom: Ractor.new: stopped #{names}; Fathom profiles the main Ractor only " \
                      "(what was collected until now is kept)")
      end

      # The :ractors stat of a profile: "stopped" when Ractor.new stopped
      # this profiler, "ignored" when hooks skipped another Ractor's threads,
      # else "none".
      def stat(profiler)
        return "stopped" if profiler.stopped_for_ractor?
        return "ignored" if NativeLoader.available? && Native.other_ractor_seen?

        "none"
      end

      # At load, so that every Ractor.new from then on goes through the
      # wrapper, whenever the first profiler starts.
      def install
        return if @installed || !defined?(::Ractor)

        @installed = true
        ::Ractor.singleton_class.prepend(StopProfilersFirst)
      end
    end
  end
end

Fathom::RactorCheck.install
