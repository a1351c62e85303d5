# frozen_string_literal: true

# Fathom: a memory profiler for Ruby with a C++ core, writing gzipped pprof.
#
#   profile = Fathom.profile(out: "heap.pb.gz") { work }
#   puts profile.report(top: 10)
require_relative "fathom/error"
require_relative "fathom/version"
require_relative "fathom/options"
require_relative "fathom/native"
require_relative "fathom/atomic_file"
require_relative "fathom/pprof/reader"
require_relative "fathom/report/top"
require_relative "fathom/profile"
require_relative "fathom/fork_hooks"
require_relative "fathom/memory_profiler"
require_relative "fathom/periodic_flusher"

module Fathom
  # mode => profiler class. New modes (:gc, :retention) are one line here once
  # their profiler exists; the error for an unknown mode lists these keys.
  PROFILERS = {
    heap: MemoryProfiler,
  }.freeze

  # Runs the block (given the profiler) under a new profiler of `mode`, stops it (also when the
  # block raises), flushes with gc: true and returns the Fathom::Profile,
  # written atomically to `out` first when given. Other options go to the
  # profiler (MemoryProfiler: exact:, interval:, max_depth:).
  def self.profile(mode: :heap, out: nil, **opts)
    raise ArgumentError, "fathom: Fathom.profile needs a block" unless block_given?

    profiler_class = PROFILERS.fetch(Options.one_of("mode", mode, PROFILERS.keys))
    out = Options.path("out", out) unless out.nil?
    profiler = profiler_class.new(**opts)
    profile = profiler.profile(gc: true) { |p| yield p }
    profile.write(out) if out
    profile
  end
end
