# frozen_string_literal: true

module Fathom
  module Files
    # Where each profile goes when several modes run together.
    #
    #   one mode:     the path given, else fathom-<mode><ext>
    #   several:      <base>.<mode><ext> for each mode, where <base> is the path
    #                 given without its profile extension; without a path,
    #                 fathom-<mode><ext> for each
    #
    #   --mode heap,gc -o prof.pb.gz            -> prof.heap.pb.gz, prof.gc.pb.gz
    #   --mode gc --format firefox -o gc.json.gz -> gc.json.gz
    #
    # One Firefox file for several modes: with --format firefox, the modes of
    # COMBINED_FIREFOX_MODES (two or more of them) share one file, every one
    # of them mapped to the same path: the path given when it names nothing
    # else, <base>.json.gz when other modes (retention) have files too, and
    # fathom-<mode>-<mode>.json.gz without a path.
    #
    #   --mode cpu,gc,heap --format firefox -o run.json.gz      -> run.json.gz (all three)
    #   --mode cpu,gc,heap,retention --format firefox -o run    -> run.json.gz, run.retention.pb.gz
    #   --mode cpu,gc,heap --format firefox                     -> fathom-cpu-gc-heap.json.gz
    #
    # <ext> is .pb.gz for pprof and .json.gz for a Firefox Profiler file (the
    # GC and CPU/wall profiles have that format). Pure Ruby: the CLI uses it to
    # print names without loading the extension.
    module OutputPaths
      PROFILE_EXTENSIONS = %w[.pb.gz .json.gz .pprof .json .pb .gz].freeze
      # The modes one combined Firefox file holds (heap as its allocation table).
      COMBINED_FIREFOX_MODES = %i[cpu wall gc heap].freeze

      module_function

      # The modes that share one Firefox file for this run ([] when none do).
      def combined_modes(modes, format)
        return [] unless format.to_sym == :firefox

        combined = modes.map(&:to_sym) & COMBINED_FIREFOX_MODES
        combined.size >= 2 ? combined : []
      end

      # A mode's file extension: the modes with a choice of format (gc, cpu,
      # wall) take their format's; the others are always pprof.
      def extension(mode, format)
        format_extension(%i[gc cpu wall].include?(mode.to_sym) ? format : :pprof)
      end

      # .json.gz for a Firefox Profiler file, .pb.gz for pprof.
      def format_extension(format)
        format.to_sym == :firefox ? ".json.gz" : ".pb.gz"
      end

      # {mode => absolute path}, in the order of `modes`.
      def for_modes(out, modes, format: :pprof)
        modes = modes.map(&:to_sym)
        combined = combined_modes(modes, format)
        paths =
          if out.nil?
            modes.to_h { |mode| [mode, File.expand_path(default(mode, format))] }
          elsif modes.size == 1
            { modes.first => File.expand_path(out) }
          else
            base = strip_extension(out)
            modes.to_h { |mode| [mode, File.expand_path("#{base}.#{mode}#{extension(mode, format)}")] }
          end
        return paths if combined.empty?

        shared =
          if out.nil? then File.expand_path("fathom-#{combined.join("-")}.json.gz")
          elsif combined.size == modes.size then File.expand_path(out)
          else File.expand_path("#{strip_extension(out)}.json.gz")
          end
        combined.each { |mode| paths[mode] = shared }
        paths
      end

      def default(mode, format)
        "fathom-#{mode}#{extension(mode, format)}"
      end

      # A PeriodicFlusher's default file name pattern (its placeholders:
      # PeriodicFlusher) for a profiler of `kind` writing `format`:
      # heap-%{pid}-%{token}-%{time}-%{index}.pb.gz, wall-....json.gz.
      def periodic_pattern(kind, format)
        "#{kind}-%{pid}-%{token}-%{time}-%{index}#{extension(kind, format)}"
      end

      # heap.pb.gz -> heap.<pid>.pb.gz; profile.out -> profile.<pid>.out; prof -> prof.<pid>
      def with_pid(path, pid)
        dir = File.dirname(path)
        base = File.basename(path)
        ext = PROFILE_EXTENSIONS.find { |e| base.end_with?(e) && base != e } || File.extname(base)
        File.join(dir, "#{base.delete_suffix(ext)}.#{pid}#{ext}")
      end

      def strip_extension(path)
        ext = PROFILE_EXTENSIONS.find { |e| path.end_with?(e) && path != e }
        ext ? path.delete_suffix(ext) : path
      end
    end
  end
end
