# frozen_string_literal: true

module Fathom
  # Where each profile goes when several modes run together.
  #
  #   one mode:     the path given, else fathom-<mode><ext>
  #   several:      <base>.<mode><ext> for each mode, where <base> is the path
  #                 given without its profile extension; without a path,
  #                 fathom-<mode><ext> for each
  #
  #   --mode heap,gc -o prof.pb.gz            -> prof.heap.pb.gz, prof.gc.pb.gz
  #   --mode gc,heap --format firefox -o run  -> run.gc.json.gz, run.heap.pb.gz
  #
  # <ext> is .pb.gz for pprof and .json.gz for a Firefox Profiler file (only
  # the GC profile has that format). Pure Ruby: the CLI uses it to print
  # names without loading the extension.
  module OutputPaths
    PROFILE_EXTENSIONS = %w[.pb.gz .json.gz .pprof .json .pb .gz].freeze

    module_function

    def extension(mode, format)
      %i[gc cpu wall].include?(mode.to_sym) && format.to_sym == :firefox ? ".json.gz" : ".pb.gz"
    end

    # {mode => absolute path}, in the order of `modes`.
    def for_modes(out, modes, format: :pprof)
      modes = modes.map(&:to_sym)
      return modes.to_h { |mode| [mode, File.expand_path(default(mode, format))] } if out.nil?
      return { modes.first => File.expand_path(out) } if modes.size == 1

      base = strip_extension(out)
      modes.to_h { |mode| [mode, File.expand_path("#{base}.#{mode}#{extension(mode, format)}")] }
    end

    def default(mode, format)
      "fathom-#{mode}#{extension(mode, format)}"
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
