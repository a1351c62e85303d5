# frozen_string_literal: true

require_relative "files/atomic_file"
require_relative "options"
require_relative "files/profile_bytes"
require_relative "pprof/reader"
require_relative "report"

module Fathom
  # One encoded profile plus the collector's statistics about how it was
  # produced. kind: :heap, :gc or :retention; format: :pprof (gzipped
  # protobuf) or :firefox (Firefox Profiler JSON, gzipped or not).
  class Profile
    KINDS = %i[heap gc retention cpu].freeze
    FORMATS = %i[pprof firefox].freeze

    attr_reader :bytes, :stats, :path, :kind, :format

    # Reads a profile written earlier (no stats are stored in the file); the
    # kind and format are recognized from the content. Within
    # Files::ProfileBytes' limits (no devices, at most 512 MiB).
    def self.load(path)
      path = Options.path("path", path)
      bytes = begin
        Files::ProfileBytes.read_file(path)
      rescue Files::ProfileBytes::Error => e
        raise Files::ProfileBytes::Error, e.message.scrub.sub(/\A(fathom: )?/, "fathom: #{path}: ")
      end
      format = Report.firefox_json?(bytes) ? :firefox : :pprof
      kind = (Report::CpuFirefoxSummary.cpu_firefox?(Report.firefox_json(bytes)) ? :cpu : :gc) if format == :firefox
      new(bytes, {}, path: File.expand_path(path), format: format, kind: kind)
    end

    def initialize(bytes, stats = {}, path: nil, kind: nil, format: :pprof)
      raise TypeError, "fathom: profile bytes must be a String, got #{Options.describe(bytes)}" unless String === bytes
      raise TypeError, "fathom: stats must be a Hash, got #{Options.describe(stats)}" unless NilClass === stats || Hash === stats

      @bytes = bytes
      @stats = (stats || {}).freeze
      @path = NilClass === path ? nil : Options.path("path", path)
      @format = Options.one_of("format", format, FORMATS)
      @kind = NilClass === kind ? nil : Options.one_of("kind", kind, KINDS)
    end

    # Recognized from the sample types when not given (Report.kind).
    def kind
      @kind ||= Report.kind(decode)
    end

    # Writes the profile atomically; returns the absolute path. An existing
    # file is replaced only if Fathom wrote it, or with overwrite: true; links,
    # devices and other non-regular files never are (Files::AtomicFile).
    def write(path, overwrite: false)
      @path = Files::AtomicFile.write(Options.path("path", path), @bytes, overwrite: Options.boolean("overwrite", overwrite))
    end

    # The decoded pprof profile (Fathom::Pprof::Profile), decoded once.
    def decode
      raise Fathom::Error, "fathom: a #{@format} profile is not pprof; open it at https://profiler.firefox.com" unless @format == :pprof

      @decode ||= Pprof.read(@bytes)
    end

    # The parsed Firefox Profiler JSON (Hash).
    def firefox_json
      raise Fathom::Error, "fathom: not a Firefox profile" unless @format == :firefox

      Report.parse_firefox_json(@bytes)
    end

    # The text report for this kind of profile: the `pprof -top` table for
    # heap profiles (sample_index, top; rows by site), the GC summary for GC
    # profiles (pprof or Firefox), the top retainers with their paths for
    # retention profiles. view: Report::View's options, as `fathom report`
    # takes them (by: :line, sort: :cum, focus: "app/", ignore:, hide:,
    # thread:, hide_gc:, notes:).
    def report(sample_index: nil, top: 20, **view)
      # Checked first, also for a Firefox profile (which refuses a sample_index).
      top = Options.row_limit("top", top)
      Report::SampleIndex.check_type!(sample_index)
      view = Report::View.from(view, "Fathom::Profile#report")
      if @format == :firefox
        json = firefox_json
        if Report::CpuFirefoxSummary.cpu_firefox?(json)
          return Report::CpuFirefoxSummary.new(json, sample_index: sample_index, top: top, view: view).to_s
        end

        view.check_for!(:gc)
        return Report::FirefoxSummary.new(json, sample_index: sample_index).to_s
      end

      Report.for_profile(decode, sample_index: sample_index, top: top, view: view).to_s
    end

    def to_s
      parts = ["#{@bytes.bytesize} bytes#{" gzipped" if Files::ProfileBytes.gzip?(@bytes)}"]
      if @stats.key?(:live_samples)
        parts << "#{@stats[:samples]} samples (#{@stats[:live_samples]} live)"
      elsif @stats.key?(:samples)
        parts << "#{@stats[:samples]} samples, #{@stats[:dropped]} dropped"
      end
      if @stats[:source] == :counters
        # No steps without hooks (stats[:steps] is 0): the GCs and the reads.
        parts << "#{@stats[:cycles]} GCs in #{@stats[:polls_with_gc]} counter reads"
      elsif @stats.key?(:steps)
        parts << "#{@stats[:steps]} GC steps in #{@stats[:periods]} periods"
      end
      parts << "flushed in #{Options.format_ns(@stats[:flush_ns])}" if @stats[:flush_ns]
      parts << "written to #{@path}" if @path
      "Fathom #{@kind || :heap} profile#{" (Firefox Profiler JSON)" if @format == :firefox}: #{parts.join(", ")}"
    end

    def inspect
      "#<#{self.class} #{self}>"
    end
  end
end
