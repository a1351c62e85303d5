# frozen_string_literal: true

require_relative "../pprof/reader"
require_relative "../pprof/writer"
require_relative "../report/frames"
require_relative "window"

module Fathom
  module Leaks
    # The leak verdicts on the pushed heap series (FATHOM_PUSH with
    # FATHOM_LEAKS=1): every sample of a site with a confident leak verdict
    # carries the pprof label leak="growing", as a request's samples carry
    # its request labels. Grafana Pyroscope keeps a sample label as a label
    # of the series, so `{service_name="app", leak="growing"}` selects the
    # leaking sites' stacks alone, while the service's series without it
    # still adds up to the whole heap. A series label on the whole profile
    # was the other way Pyroscope's model offers: it would start a new
    # series for the whole heap each time a verdict came or went, and say
    # nothing of which stacks leak. The sites are the verdicts of the
    # windows analysed so far, so a pushed window carries those of the
    # window before it.
    module PushLabels
      LABEL = "leak"
      VALUE = "growing"

      module_function

      # bytes: a gzipped heap pprof; sites: the site keys of the confident
      # leaks (Analysis::Verdict#key). The profile re-encoded with the
      # label, or `bytes` itself when no sample is of those sites.
      def apply(bytes, sites)
        return bytes if sites.empty?

        profile = Pprof.read(bytes)
        frames = Report::Frames.new(profile)
        keys = {}
        labelled = 0
        profile.samples.each do |sample|
          key = keys[sample.location_ids] ||= Window.site_of(frames, sample.location_ids).first
          next unless sites.include?(key)

          sample.labels = sample.labels.merge(LABEL => VALUE)
          labelled += 1
        end
        labelled.zero? ? bytes : Pprof::Writer.gzip(profile)
      end
    end
  end
end
