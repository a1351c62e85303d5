# frozen_string_literal: true

require_relative "modes"
require_relative "output_paths"

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
      @started = []
    end

    # Starts every profiler (a retention snapshot is taken at finish). If one
    # fails to start, those already started are stopped and the error raised.
    def start
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
    # the snapshot explains the heap profile's top sites. A block, if given,
    # gets each mode's error instead of it being raised (autorun's way: one
    # failing profile must not cost the others).
    def finish
      heap = @profilers[:heap]
      Modes.finish_order(@modes).each_with_object({}) do |mode, out|
        out[mode] = finish_one(mode, heap)
      rescue StandardError => e
        raise unless block_given?

        yield mode, e
      end
    end

    # {mode => absolute path} for `out` (see OutputPaths), with the pid
    # inserted when given (a forked child's files).
    def paths(out, pid: nil)
      paths = OutputPaths.for_modes(out, @modes, format: @format)
      pid ? paths.transform_values { |path| OutputPaths.with_pid(path, pid) } : paths
    end

    private

    def finish_one(mode, heap)
      profiler = @profilers.fetch(mode)
      return profiler.flush_explaining(heap) if mode == :retention && heap

      profiler.flush(gc: true)
    end
  end
end
