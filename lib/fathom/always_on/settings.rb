# frozen_string_literal: true

require_relative "../options"
require_relative "../env_text"
require_relative "../modes"
require_relative "../periodic_flusher"
require_relative "../files/rotation"

module Fathom
  class AlwaysOn
    # The FATHOM_* settings, read from `env`: ENV, or any Hash of the same
    # shape (a test's). `fathom run`'s autorun takes the profilers' options
    # from them, fathom/setup (and so the Railtie) AlwaysOn's. Errors are
    # ArgumentError/TypeError naming the variable; a variable that is unset
    # or blank leaves the default.
    module Settings
      module_function

      # The profilers' options for `modes`, for the modes that take them.
      def profilers(modes, env)
        opts = {}
        value = reader(env)
        if modes.include?(:heap) || modes.intersect?(Modes::CPU_MODES)
          opts[:exact] = Options.parse_boolean("FATHOM_EXACT", value["FATHOM_EXACT"]) if value["FATHOM_EXACT"] && modes.include?(:heap)
          opts[:census] = Options.parse_boolean("FATHOM_CENSUS", value["FATHOM_CENSUS"]) if value["FATHOM_CENSUS"] && modes.include?(:heap)
          if (v = value["FATHOM_INTERVAL"])
            ns = Options.sampling_interval_ns("FATHOM_INTERVAL", v)
            opts[:interval] = "#{ns}ns"
          end
          if modes.intersect?(Modes::CPU_MODES) && value["FATHOM_NATIVE"]
            opts[:native] = Options.parse_boolean("FATHOM_NATIVE", value["FATHOM_NATIVE"])
          end
          if (v = value["FATHOM_MAX_DEPTH"])
            opts[:max_depth] = Options.parse_integer("FATHOM_MAX_DEPTH", v, Options::MAX_DEPTH_RANGE)
          end
        end
        # Retention: String hash keys by their bytes (off: by their shape).
        if modes.include?(:retention) && (v = value["FATHOM_STRING_CONTENTS"])
          opts[:string_contents] = Options.parse_boolean("FATHOM_STRING_CONTENTS", v)
        end
        if modes.include?(:gc) && (v = value["FATHOM_COALESCE"])
          bounds = { min_ns: Options::COALESCE_NS.begin, max_ns: Options::COALESCE_NS.end } # GcProfiler's
          opts[:coalesce] = v.strip == "0" ? 0 : "#{Options.duration_ns("FATHOM_COALESCE", v, **bounds)}ns"
        end
        if modes.include?(:gc) && (v = value["FATHOM_GC_SOURCE"])
          opts[:gc_source] = Options.one_of("FATHOM_GC_SOURCE", v, Modes::GC_SOURCES)
        end
        opts[:format] = Options.one_of("FATHOM_FORMAT", value["FATHOM_FORMAT"], Modes::ALL_FORMATS) if value["FATHOM_FORMAT"]
        opts
      end

      # AlwaysOn.new's options: FATHOM_DIR (required unless require_dir is
      # false: profiles then go to sinks only), FATHOM_MODE (default heap;
      # heap, gc, cpu, wall, not cpu and wall together), FATHOM_EVERY,
      # FATHOM_KEEP, FATHOM_KEEP_MB, and the profilers'.
      def always_on(env, require_dir: true)
        value = reader(env)
        dir = value["FATHOM_DIR"]
        raise ArgumentError, "fathom: FATHOM_DIR must name the directory for the profiles" if dir.nil? && require_dir

        modes = Modes.parse(value["FATHOM_MODE"] || "heap", "FATHOM_MODE")
        opts = { modes: modes, dir: dir }
        if (v = value["FATHOM_EVERY"])
          opts[:every] = "#{Options.duration_ns("FATHOM_EVERY", v, min_ns: PeriodicFlusher::INTERVAL_NS.begin,
                                                                  max_ns: PeriodicFlusher::INTERVAL_NS.end)}ns"
        end
        opts[:keep_files] = Options.parse_integer("FATHOM_KEEP", value["FATHOM_KEEP"], Files::Rotation::FILES_RANGE) if value["FATHOM_KEEP"]
        opts[:keep_mb] = Options.parse_integer("FATHOM_KEEP_MB", value["FATHOM_KEEP_MB"], Files::Rotation::MB_RANGE) if value["FATHOM_KEEP_MB"]
        opts.merge(profilers(modes, env))
      end

      # name -> the variable's value, nil when unset or blank; bytes that
      # are not UTF-8 are an ArgumentError naming the variable (EnvText).
      def reader(env)
        EnvText.reader(env)
      end
    end
  end
end
