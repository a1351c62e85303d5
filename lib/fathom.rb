# frozen_string_literal: true

# Fathom: a profiler for Ruby with a C++ core.
#
#   profile = Fathom.profile(out: "heap.pb.gz") { work }          # heap (allocations, in use)
#   Fathom.profile(mode: :gc, format: :firefox, out: "gc.json.gz") { work }
#   profiles = Fathom.profile(mode: [:heap, :gc], out: "run") { work }
#   puts profile.report(top: 10)
require_relative "fathom/error"
require_relative "fathom/version"
require_relative "fathom/options"
require_relative "fathom/native"
require_relative "fathom/atomic_file"
require_relative "fathom/output_paths"
require_relative "fathom/pprof/reader"
require_relative "fathom/report/top"
require_relative "fathom/profile"
require_relative "fathom/fork_hooks"
require_relative "fathom/collector_lifecycle"
require_relative "fathom/memory_profiler"
require_relative "fathom/gc_profiler"
require_relative "fathom/retention"
require_relative "fathom/periodic_flusher"

module Fathom
  # mode => profiler class; the error for an unknown mode lists these keys.
  PROFILERS = {
    heap: MemoryProfiler,
    gc: GcProfiler,
    retention: RetentionProfiler,
  }.freeze

  # Runs the block (given the profiler, or a Hash of them) under new
  # profilers of `mode` (a Symbol or an Array of them), stops them (also when
  # the block raises), flushes with gc: true and returns the Fathom::Profile
  # — or, for several modes, a Hash mode => Profile. `out` is written
  # atomically first; with several modes it is a base name (see
  # Fathom::OutputPaths: out "run" -> run.heap.pb.gz, run.gc.pb.gz). Other
  # options go to the profiler that knows them (MemoryProfiler: exact:,
  # interval:, max_depth:; GcProfiler: coalesce:, flush_on_major:, format:;
  # retention: a snapshot when the block ends, see Fathom.retention_snapshot).
  def self.profile(mode: :heap, out: nil, **opts)
    raise ArgumentError, "fathom: Fathom.profile needs a block" unless block_given?

    modes = Array(mode).map { |m| Options.one_of("mode", m, PROFILERS.keys) }.uniq
    raise ArgumentError, "fathom: mode must name at least one of #{PROFILERS.keys.map(&:inspect).join(", ")}" if modes.empty?

    out = Options.path("out", out) unless out.nil?
    profilers = build_profilers(modes, opts)
    profiles = run_profilers(profilers) { yield(modes.size == 1 ? profilers.values.first : profilers) }
    paths = OutputPaths.for_modes(out, modes, format: opts.fetch(:format, :pprof)) if out
    profiles.each { |m, profile| profile.write(paths.fetch(m)) } if out
    modes.size == 1 ? profiles.values.first : profiles
  end

  # Splits `opts` between the profilers of `modes` by the options each one
  # declares (its DEFAULTS); an option no selected profiler knows is an error.
  def self.build_profilers(modes, opts)
    known = modes.flat_map { |m| PROFILERS.fetch(m)::DEFAULTS.keys }
    Options.check_unknown!(opts, known, "Fathom.profile(mode: #{modes.size == 1 ? modes.first.inspect : modes.inspect})")
    modes.to_h do |m|
      klass = PROFILERS.fetch(m)
      [m, klass.new(**opts.slice(*klass::DEFAULTS.keys))]
    end
  end
  private_class_method :build_profilers

  def self.run_profilers(profilers)
    started = []
    begin
      profilers.each_value { |p| started << p.start }
      yield
    ensure
      started.reverse_each(&:stop)
    end
    # heap + retention: the snapshot explains the heap profile's top sites;
    # it needs the heap profiler's live records, so it goes first.
    explained = profilers[:retention]&.flush_explaining(profilers[:heap]) if profilers[:heap]
    profilers.to_h { |m, p| [m, m == :retention && explained ? explained : p.flush(gc: true)] }
  end
  private_class_method :run_profilers
end
