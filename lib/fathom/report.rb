# frozen_string_literal: true

require "json"
require "stringio"
require "zlib"
require_relative "pprof/reader"
require_relative "report/top"
require_relative "report/gc_summary"
require_relative "report/firefox_summary"
require_relative "report/retention"
require_relative "report/kind"
require_relative "report/diff"
require_relative "report/site_retention"

module Fathom
  # Picks the text report that fits a profile's kind.
  module Report
    module_function

    # bytes: a file's content — gzipped or plain pprof, or Firefox Profiler JSON.
    def for_bytes(bytes, sample_index: nil, top: 20)
      json = firefox_json(bytes)
      return FirefoxSummary.new(json, sample_index: sample_index) if json

      for_profile(Pprof.decode(bytes), sample_index: sample_index, top: top)
    end

    # profile: a decoded Fathom::Pprof::Profile.
    def for_profile(profile, sample_index: nil, top: 20)
      case kind(profile)
      when :gc then GcSummary.new(profile, sample_index: sample_index)
      when :retention then Retention.new(profile, sample_index: sample_index, top: top)
      else Top.new(profile, sample_index: sample_index, top: top)
      end
    end

    # The file sniffer: does `bytes` hold a JSON object, gzipped or not (a
    # Firefox Profiler file; otherwise it is pprof, or junk)? Decompresses
    # at most 64 bytes.
    def firefox_json?(bytes)
      head = bytes.start_with?(Pprof::GZIP_MAGIC) ? Zlib::GzipReader.new(StringIO.new(bytes)).read(64).to_s : bytes[0, 64]
      head.lstrip.start_with?("{")
    rescue Zlib::Error
      false
    end

    # The parsed JSON of a Firefox Profiler file, else nil.
    def firefox_json(bytes)
      return nil unless firefox_json?(bytes)

      text = bytes.start_with?(Pprof::GZIP_MAGIC) ? Zlib::GzipReader.new(StringIO.new(bytes)).read : bytes
      JSON.parse(text)
    rescue Zlib::Error, JSON::ParserError
      nil
    end
  end
end
