# frozen_string_literal: true

require_relative "arguments"
require_relative "gc_summary"
require_relative "retention"
require_relative "cpu_summary"

module Fathom
  module Report
    # What a decoded pprof profile is, from its sample types (the one rule:
    # Fathom::Profile#kind, the report picker and `fathom diff` use it):
    # gc_steps and wall (hooks) or gcs and cpu alone (counters) mean a GC
    # profile (GcSummary.gc_profile?), samples+cpu+wall a CPU/wall profile,
    # retained_space a retention profile, anything else a heap profile.
    def self.kind(profile)
      check_profile!(profile)
      if GcSummary.gc_profile?(profile) then :gc
      elsif CpuSummary.cpu_profile?(profile) then :cpu
      elsif Retention.retention_profile?(profile) then :retention
      else :heap
      end
    end
  end
end
