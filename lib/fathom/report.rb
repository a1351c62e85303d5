# frozen_string_literal: true

require_relative "options"
require_relative "files/profile_bytes"
require_relative "pprof/reader"
require_relative "report/arguments"
require_relative "report/top"
require_relative "report/gc_summary"
require_relative "report/firefox_summary"
require_relative "report/retention"
require_relative "report/cpu_summary"
require_relative "report/kind"
require_relative "report/diff"
require_relative "report/site_retention"

module Fathom
  # Picks the text report that fits a profile's kind.
  #
  # Errors follow one rule, which `fathom report` turns into its exit
  # status: Fathom::Error when the bytes are not a profile the report can
  # use (exit 1), ArgumentError/TypeError when an option does not fit
  # (a sample_index the profile does not have, a top of 0; exit 2).
  module Report
    module_function

    # bytes: a file's content — gzipped or plain pprof, or Firefox Profiler JSON.
    def for_bytes(bytes, sample_index: nil, top: 20)
      raise TypeError, "fathom: profile bytes must be a String, got #{Options.describe(bytes)}" unless String === bytes

      top = Options.row_limit("top", top)
      SampleIndex.check_type!(sample_index)
      if firefox_json?(bytes)
        json = parse_firefox_json(bytes)
        return CpuFirefoxSummary.new(json, sample_index: sample_index, top: top) if CpuFirefoxSummary.cpu_firefox?(json)

        return FirefoxSummary.new(json, sample_index: sample_index)
      end

      for_profile(Pprof.decode(bytes), sample_index: sample_index, top: top)
    end

    # profile: a decoded Fathom::Pprof::Profile. sample_index and top apply
    # to heap profiles; for the others they are checked and ignored.
    def for_profile(profile, sample_index: nil, top: 20)
      check_profile!(profile)

      top = Options.row_limit("top", top)
      case kind(profile)
      when :gc then GcSummary.new(profile, sample_index: sample_index)
      when :cpu then CpuSummary.new(profile, sample_index: sample_index, top: top)
      when :retention
        SampleIndex.resolve(profile, sample_index)
        Retention.new(profile, sample_index: sample_index, top: top)
      else Top.new(profile, sample_index: sample_index, top: top)
      end
    end

    # The file sniffer: does `bytes` hold a JSON object, gzipped or not (a
    # Firefox Profiler file; otherwise it is pprof, or junk)? Decompresses
    # at most 64 bytes.
    def firefox_json?(bytes)
      require "zlib" # here, not at load (lib/fathom/files/stdlib.rb)
      require "stringio"
      head = ProfileBytes.gzip?(bytes) ? Zlib::GzipReader.new(StringIO.new(bytes)).read(64).to_s : bytes.byteslice(0, 64)
      head.b.lstrip.start_with?("{")
    rescue Zlib::Error
      false
    end

    # The parsed JSON of a Firefox Profiler file, else nil.
    def firefox_json(bytes)
      parse_firefox_json(bytes) if firefox_json?(bytes)
    rescue Fathom::Error
      nil
    end

    # The parsed JSON object of a Firefox Profiler file (gzipped or not);
    # Fathom::Error saying why when it is not one.
    def parse_firefox_json(bytes)
      require "json" # here, not at load (lib/fathom/files/stdlib.rb)
      text = ProfileBytes.gzip?(bytes) ? ProfileBytes.gunzip(bytes) : bytes
      # JSON is UTF-8; Ruby's parser (json 2.6, Ruby 3.1) lets invalid bytes
      # through into Strings that raise later, wherever a report reads them.
      unless text.dup.force_encoding(Encoding::UTF_8).valid_encoding?
        raise Fathom::Error, "fathom: not valid Firefox Profiler JSON (it holds bytes that are not UTF-8)"
      end

      json = JSON.parse(text)
      raise Fathom::Error, "fathom: not a Firefox Profiler profile (the JSON is not an object)" unless Hash === json

      json
    rescue JSON::ParserError => e
      # The parser quotes the rest of the input, any bytes: keep its first
      # line, short and printable.
      detail = Options.clean(e.message.b.lines.first.to_s.strip, 100)
      raise Fathom::Error, "fathom: not valid Firefox Profiler JSON (truncated or malformed: #{detail})"
    end
  end
end
