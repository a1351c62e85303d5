# frozen_string_literal: true

# Fathom: a profiler for Ruby with a C++ core. This file is all of
# `require "fathom"` but the Rails hook (lib/fathom.rb), so that what the
# Railtie loads (fathom/setup, fathom/rack) can require it: requiring
# lib/fathom.rb there closed a require circle.
#
#   profile = Fathom.profile(out: "heap.pb.gz") { work }          # heap (allocations, in use)
#   Fathom.profile(mode: :gc, format: :firefox, out: "gc.json.gz") { work }
#   profiles = Fathom.profile(mode: [:heap, :gc], out: "run") { work }
#   puts profile.report(top: 10)
require_relative "error"
require_relative "version"
require_relative "options"
require_relative "native"
require_relative "labels"
require_relative "files/atomic_file"
require_relative "files/output_paths"
require_relative "pprof/reader"
require_relative "report/top"
require_relative "profile"
require_relative "process/fork_hooks"
require_relative "profilers/collector_lifecycle"
require_relative "profilers/heap_profiler"
require_relative "profilers/gc_profiler"
require_relative "profilers/cpu_profiler"
require_relative "retention"
require_relative "profilers/retention_profiler"
require_relative "profilers/dump_analysis"
require_relative "profilers/heap_dump"
require_relative "periodic_flusher"
require_relative "session"

module Fathom
  # Runs the block (given the profiler, or a Hash of them) under new
  # profilers of `mode` (a Symbol or an Array of them, see Fathom::Modes),
  # stops them (also when the block raises), flushes with gc: true and
  # returns the Fathom::Profile — or, for several modes, a Hash mode =>
  # Profile. `out` is written atomically first; with several modes it is a
  # base name (see Fathom::Files::OutputPaths: out "run" -> run.heap.pb.gz,
  # run.gc.pb.gz; with format: :firefox, the cpu/wall, gc and heap modes
  # share one Firefox Profiler file and one Profile, see Session#finish); an
  # existing file Fathom did not write is replaced only
  # with overwrite: true. Other options go to the profiler that knows them
  # (HeapProfiler: exact:, interval:, max_depth:, liveness:, census:; GcProfiler:
  # coalesce:, flush_on_major:, format:, gc_source:; CpuProfiler for :cpu and
  # :wall: interval:, max_depth:; retention: max_depth:, a snapshot
  # when the block ends, see Fathom.retention_snapshot).
  def self.profile(mode: Modes::DEFAULT, out: nil, overwrite: false, **opts)
    raise ArgumentError, "fathom: Fathom.profile needs a block" unless block_given?

    out = Options.path("out", out) unless NilClass === out
    overwrite = Options.boolean("overwrite", overwrite)
    session = Session.new(mode, **opts)
    paths = session.paths(out) if out
    # Refuse an unwritable target before the work, not after it.
    paths&.each_value { |path| Files::AtomicFile.check_target!(path, overwrite: overwrite) }
    session.start
    begin
      yield(session.modes.size == 1 ? session.profilers.values.first : session.profilers)
    ensure
      session.stop
    end
    profiles = session.finish
    session.outputs(profiles, paths).each { |_label, profile, path| profile.write(path, overwrite: overwrite) } if out
    profiles = session.modes.to_h { |m| [m, profiles.fetch(m)] }  # in the order asked
    session.modes.size == 1 ? profiles.values.first : profiles
  end
end
