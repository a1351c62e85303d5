# frozen_string_literal: true

require_relative "../options"
require_relative "../pprof/reader"

module Fathom
  # The arguments every report takes, checked the same way: the decoded
  # profile, and sample_index.
  module Report
    # A report takes a decoded profile (Fathom::Pprof.read); anything else
    # is the caller's mistake, a TypeError naming the argument.
    def self.check_profile!(profile, name = "profile")
      return profile if Pprof::Profile === profile

      raise TypeError, "fathom: #{name} must be a Fathom::Pprof::Profile (from Fathom::Pprof.read), " \
                       "got #{Options.describe(profile)}"
    end

    # The sample_index option of every report: a sample type name (String
    # or Symbol) or its Integer position; nil picks the profile's
    # default_sample_type, else the last type (pprof's rule). A value the
    # profile does not have is the option's fault (ArgumentError); a
    # profile without sample types is the data's (Fathom::Error).
    module SampleIndex
      module_function

      def check_type!(sample_index)
        return if NilClass === sample_index || String === sample_index || Symbol === sample_index || Integer === sample_index

        raise TypeError, "fathom: sample_index must be a sample type name (String), got #{Options.describe(sample_index)}"
      end

      # The index into profile.sample_types.
      def resolve(profile, sample_index)
        check_type!(sample_index)
        types = profile.sample_types
        raise Fathom::Error, "fathom: not a usable profile: it has no sample types" if types.empty?

        case sample_index
        when nil
          profile.default_sample_type && profile.sample_type_index(profile.default_sample_type) || types.size - 1
        when Integer
          return sample_index if sample_index >= 0 && sample_index < types.size

          raise ArgumentError, "fathom: sample_index #{sample_index} out of range (available: #{available(types)})"
        else
          profile.sample_type_index(sample_index.to_s) or
            raise ArgumentError, "fathom: unknown sample_index #{Options.shown(sample_index.to_s)} (available: #{available(types)})"
        end
      end

      def available(types)
        types.map { |name, _| Options.clean(name) }.join(", ")
      end
    end
  end
end
