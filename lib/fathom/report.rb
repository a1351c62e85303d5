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
require_relative "report/view"
require_relative "report/method_view"
require_relative "report/flame_html"
require_relative "report/merge"
require_relative "report/duplicate_strings"
require_relative "pprof/writer"

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
    # view: a View (rows, order, filters, notes), or its options as keywords
    # (by:, sort:, focus:, ignore:, hide:, thread:, hide_gc:, notes:).
    def for_bytes(bytes, sample_index: nil, top: 20, view: nil, **view_options)
      raise TypeError, "fathom: profile bytes must be a String, got #{Options.describe(bytes)}" unless String === bytes

      top = Options.row_limit("top", top)
      SampleIndex.check_type!(sample_index)
      view = view_of(view, view_options)
      if firefox_json?(bytes)
        json = parse_firefox_json(bytes)
        if CpuFirefoxSummary.cpu_firefox?(json)
          return CpuFirefoxSummary.new(json, sample_index: sample_index, top: top, view: view)
        end

        view.check_for!(:gc)
        return FirefoxSummary.new(json, sample_index: sample_index)
      end

      for_profile(decode(bytes), sample_index: sample_index, top: top, view: view)
    end

    # What fathom reads, for the message about a file that is not one.
    READS = "fathom reads pprof profiles (.pb.gz, from Fathom, go tool pprof, Pyroscope) and Fathom's Firefox " \
            "Profiler files (.json.gz)"

    # Pprof.decode, with a message that names the formats Fathom reads
    # when the bytes are plainly something else (a Ruby file, a stackprof
    # or vernier dump, JSON of another kind) instead of the protobuf
    # decoder's wire-type error.
    def decode(bytes)
      Pprof.decode(bytes)
    rescue Pprof::DecodeError => e
      what = other_format(bytes) or raise
      raise Pprof::DecodeError, "fathom: not a profile Fathom reads: #{what}; #{READS}"
    end

    # What a file that is not pprof looks like, or nil when it could be a
    # damaged profile (then the decoder's own message says where).
    def other_format(bytes)
      head = bytes.byteslice(0, 4096).to_s.b
      if Files::ProfileBytes.gzip?(head)
        begin
          require "zlib"
          require "stringio"
          head = Zlib::GzipReader.new(StringIO.new(bytes)).read(4096).to_s.b
        rescue Zlib::Error
          return nil
        end
      end
      return "a stackprof dump (Ruby Marshal data: read it with `stackprof FILE`)" if head.start_with?("\x04\x08".b)
      return "JSON that is not a Fathom profile (a vernier or speedscope file opens at https://profiler.firefox.com " \
             "or https://www.speedscope.app)" if head.lstrip.start_with?("{", "[")

      # Too short to tell text from a damaged profile (an empty gzip, a
      # few stray bytes): the decoder's own message.
      return nil if head.bytesize < 16

      text = head.dup.force_encoding(Encoding::UTF_8).scrub
      return nil if text.count("\uFFFD") > 3 || text.count("\x00-\x08\x0e-\x1f") > text.size / 100

      ruby = text.match?(/^\s*(require|class|module|def|puts|#!.*ruby)\b/)
      ruby ? "a text file (Ruby source code?)" : "a text file"
    end

    # profile: a decoded Fathom::Pprof::Profile. sample_index and top apply
    # to heap, CPU and retention profiles; for GC profiles sample_index
    # picks the column the table is sorted by. The view's rows and filters
    # apply where the profile has stacks (not to GC profiles: ArgumentError).
    def for_profile(profile, sample_index: nil, top: 20, view: nil, **view_options)
      check_profile!(profile)

      top = Options.row_limit("top", top)
      view = view_of(view, view_options)
      kind = kind(profile)
      view.check_for!(kind, profile)
      filtered = view.apply(profile)
      filters = view.filtered? ? filters_text(view, profile, filtered) : nil
      case kind
      when :gc then GcSummary.new(profile, sample_index: sample_index)
      when :cpu
        CpuSummary.new(filtered, sample_index: sample_index, top: top, by: view.by_for(:cpu), sort: view.sort,
                                 notes: view.notes, filters: filters)
      when :retention
        SampleIndex.resolve(profile, sample_index)
        Retention.new(filtered, sample_index: sample_index, top: top, by: view.by, filters: filters)
      else
        Top.new(filtered, sample_index: sample_index, top: top, by: view.by_for(:heap), sort: view.sort,
                          notes: view.notes, filters: filters)
      end
    end

    def view_of(view, options)
      if view
        raise TypeError, "fathom: view must be a Fathom::Report::View, got #{Options.describe(view)}" unless View === view
        raise ArgumentError, "fathom: give view: or its options, not both" unless options.empty?

        return view
      end
      View.from(options, "Fathom::Report.for_bytes")
    end

    # "--focus csv (1200 of 5000 samples kept)".
    def filters_text(view, before, after)
      kept = after.samples.size
      "#{view.filters_text} (#{kept} of #{before.samples.size} sample#{"s" unless before.samples.size == 1} kept" \
        "#{", matching frames hidden" if view.hide})"
    end

    # The file sniffer: does `bytes` hold a JSON object, gzipped or not (a
    # Firefox Profiler file; otherwise it is pprof, or junk)? Decompresses
    # at most 64 bytes.
    def firefox_json?(bytes)
      require "zlib" # here, not at load (lib/fathom/files/stdlib.rb)
      require "stringio"
      head = Files::ProfileBytes.gzip?(bytes) ? Zlib::GzipReader.new(StringIO.new(bytes)).read(64).to_s : bytes.byteslice(0, 64)
      head.b.lstrip.start_with?("{")
    rescue Zlib::Error
      false
    end

    # The CPU/wall samples of a Fathom Firefox Profiler file as a
    # Pprof::Profile (for a flame graph); Fathom::Error for another file.
    def firefox_cpu_profile(bytes)
      json = parse_firefox_json(bytes)
      unless CpuFirefoxSummary.cpu_firefox?(json)
        raise Fathom::Error, "fathom: a GC Firefox Profiler file has no stacks to draw (open it at https://profiler.firefox.com)"
      end

      mode = json["meta"]["product"][CpuFirefoxSummary::PRODUCT, 1]
      FirefoxTables.cpu(json, mode: mode) or raise Fathom::Error, "fathom: the Firefox Profiler file has no CPU samples"
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
      text = Files::ProfileBytes.gzip?(bytes) ? Files::ProfileBytes.gunzip(bytes) : bytes
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
