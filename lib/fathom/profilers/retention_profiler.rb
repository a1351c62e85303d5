# frozen_string_literal: true

require_relative "../options"
require_relative "../modes"
require_relative "../retention"

module Fathom
  # Fathom.profile(mode: :retention) { ... }: a snapshot when the block ends.
  # Holds no native collector between flushes: each flush takes a
  # Fathom::Retention snapshot (see Profilers::CollectorLifecycle for the vocabulary).
  class RetentionProfiler
    DEFAULTS = Modes::DEFAULTS.fetch(:retention)

    def initialize(**opts)
      Options.check_unknown!(opts, DEFAULTS.keys, "Fathom::RetentionProfiler.new")
      opts = DEFAULTS.merge(opts)
      @max_depth = Options.integer("max_depth", opts[:max_depth], Retention::MAX_DEPTH_RANGE)
      @string_contents = Options.boolean("string_contents", opts[:string_contents])
    end

    def start = self
    def stop = self
    def running? = false
    def kind = :retention
    def format = :pprof

    # A snapshot now, as a Fathom::Profile of kind :retention. explaining: a
    # HeapProfiler whose top live allocation sites the snapshot also
    # explains (Fathom::Retention.explain_sites), taken before that heap
    # profiler is flushed.
    def flush(gc: true, explaining: nil, stamp: nil)
      # In-process: this snapshot ends a profiled block or program, where a
      # pause costs nothing and the in-process walk names a proc's captured
      # locals, which the forked child cannot (docs/internals/retention.md,
      # "Forked snapshots").
      #
      # Keywords spelled out, not splatted from a Hash: a splat copies the
      # Hash, and the copy, garbage at once, stays in a stale slot of this
      # thread's C stack, where the snapshot's conservative scan charged it
      # to the program (docs/internals/retention.md, "Why the top sites are
      # alive"). strings: true adds the census of duplicated strings
      # (`fathom report --strings`).
      if explaining
        return Retention.explain_sites(explaining, gc: gc, max_depth: @max_depth, string_contents: @string_contents,
                                                   stamp: stamp, fork: false, strings: true)
      end

      Retention.snapshot(gc: gc, max_depth: @max_depth, string_contents: @string_contents, stamp: stamp, fork: false,
                         strings: true)
    end
  end
end
