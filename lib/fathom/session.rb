# frozen_string_literal: true

require_relative "modes"
require_relative "files/output_paths"

module Fathom
  # The profilers of one run, from start to written files: what
  # Fathom.profile does around its block and what `fathom run`'s autorun
  # does around the whole program.
  #
  #   session = Session.new(%i[heap retention], exact: true)
  #   session.start
  #   ...                         # the profiled code
  #   session.stop
  #   profiles = session.finish   # {mode => Fathom::Profile}, retention first
  #   session.write(profiles, out: "run")   # run.heap.pb.gz, run.retention.pb.gz
  #
  # Options are split between the profilers by the options each declares
  # (Modes::DEFAULTS); one that no selected profiler knows is an error.
  class Session
    attr_reader :modes, :profilers

    def initialize(modes, format: nil, **opts)
      @modes = Modes.parse(modes)
      if format
        format = Modes.check_format!(@modes, format)
        # Only the modes with a choice take it (Modes::FORMATS).
        opts[:format] = format if @modes.any? { |m| Modes::FORMATS.fetch(m).size > 1 }
      end
      known = @modes.flat_map { |m| Modes::DEFAULTS.fetch(m).keys }
      Options.check_unknown!(opts, known, "Fathom.profile(mode: #{@modes.size == 1 ? @modes.first.inspect : @modes.inspect})")
      @format = format || :pprof
      @profilers = @modes.to_h do |m|
        [m, Modes.new_profiler(m, **opts.slice(*Modes::DEFAULTS.fetch(m).keys))]
      end
      @combined = Files::OutputPaths.combined_modes(@modes, @format)
      # Known now, so that finish makes no Array of its own before the
      # retention snapshot: garbage made there stays in a stale slot of the
      # C stack, which the snapshot scans conservatively and charged to the
      # program (docs/internals/retention.md, "Why the top sites are alive").
      heap = @profilers[:heap]
      @finish_order = Modes.finish_order(@modes, heap_first: heap && !heap.exact) - @combined
      @started = []
    end

    # The modes that go into one Firefox Profiler file (format :firefox and
    # two or more of cpu/wall, gc, heap), [] otherwise.
    attr_reader :combined

    # Starts every profiler (a retention snapshot is taken at finish). If one
    # fails to start, those already started are stopped and the error raised.
    def start
      # The combined file's allocation table needs each sample's time.
      @profilers[:heap].keep_allocation_timeline! if @combined.include?(:heap)
      @profilers.each_value { |p| @started << p.start }
      self
    rescue StandardError
      stop
      raise
    end

    def stop
      @started.reverse_each(&:stop)
      @started.clear
      self
    end

    # The profiles, in Modes.finish_order. With heap and retention together
    # the snapshot explains the heap profile's top sites (a sampled heap
    # profile is flushed first, its census taken before the snapshot
    # allocates). A block, if given,
    # gets each mode's error instead of it being raised (autorun's way: one
    # failing profile must not cost the others).
    #
    # The modes of #combined all map to one Profile (the same object): a
    # Firefox Profiler file with the CPU/wall tracks, the GC track and the
    # heap allocations on one timeline; a block gets "cpu+gc+heap" as its mode.
    def finish
      heap = @profilers[:heap]
      out = {}
      @finish_order.each do |mode|
        out[mode] = finish_one(mode, heap)
      rescue StandardError => e
        raise unless block_given?

        yield mode, e
      end
      unless @combined.empty?
        begin
          profile = finish_combined
          @combined.each { |mode| out[mode] = profile }
        rescue StandardError => e
          raise unless block_given?

          yield @combined.join("+"), e
        end
      end
      out
    end

    # [[label, profile, path], ...]: each file once (the combined modes share
    # one), label naming its mode(s).
    def outputs(profiles, paths)
      profiles.group_by { |_mode, profile| profile.object_id }.map do |_id, pairs|
        [pairs.map(&:first).join("+"), pairs.first.last, paths.fetch(pairs.first.first)]
      end
    end

    # {mode => absolute path} for `out` (see Files::OutputPaths), with the pid
    # inserted when given (a forked child's files).
    def paths(out, pid: nil)
      paths = Files::OutputPaths.for_modes(out, @modes, format: @format)
      pid ? paths.transform_values { |path| Files::OutputPaths.with_pid(path, pid) } : paths
    end

    private

    # CPU first, then GC, then the heap, whose flush runs a GC (Fathom's own,
    # so it is kept out of the GC track).
    def finish_combined
      parts = Native::FirefoxParts.new
      stats = {}
      order = %i[cpu wall gc heap] & @combined
      order.each do |mode|
        profiler = @profilers.fetch(mode)
        stats[mode] = mode == :heap ? profiler.take_firefox_part(parts, gc: true) : profiler.take_firefox_part(parts)
      end
      kind = (@combined & Modes::CPU_MODES).empty? ? :gc : :cpu
      Profile.new(parts.encode(true), { combined: stats }, kind: kind, format: :firefox)
    end

    def finish_one(mode, heap)
      profiler = @profilers.fetch(mode)
      return profiler.flush(gc: true, explaining: heap) if mode == :retention && heap

      profiler.flush(gc: true)
    end
  end
end
