# frozen_string_literal: true

require_relative "units"
require_relative "gems"
require_relative "../options"
require_relative "../error"
require_relative "../string_census"

module Fathom
  module Report
    # Duplicated strings: groups of live strings with the same bytes, how
    # many copies, the bytes they hold, and where they were allocated, like
    # memory_profiler's string report, read from a retention snapshot's
    # census (StringCensus: `fathom report retained.pb.gz --strings`) or
    # from a heap dump (`fathom analyze heap.json --strings`).
    #
    #   Duplicated strings: 61234 live strings, 4.1MB; 2.3MB is in copies (same bytes as another string)
    #       copies      bytes  length  string    where allocated (copies)
    #        40000     1.53MB       7  #1a2b     CSV::Parser#parse_quotable_loose .../csv/parser.rb:876 (39990)
    #
    # A string is shown by its length and a 16-bit hash of its bytes unless
    # its contents were recorded (the snapshot's string_contents, a dump
    # written with values and read with --string-contents).
    class DuplicateStrings
      Group = Struct.new(:length, :copies, :bytes, :hash, :value, :sites)

      # From a decoded retention profile's comments.
      def self.from_profile(profile, top: 20)
        Report.check_profile!(profile)
        total, groups = StringCensus.parse(profile.comments)
        unless total
          kind = Report.kind(profile)
          hint = if kind == :retention
                   "this snapshot was taken without it: Fathom.retention_snapshot(strings: true), or fathom run " \
                     "--mode retention (which takes it at exit)"
                 else
                   "it is in retention profiles (fathom run --mode retention), not in a #{kind} profile; for a " \
                     "heap dump: fathom analyze DUMP --strings"
                 end
          raise Fathom::Error, "fathom: no string census in this profile: #{hint}"
        end
        rows = groups.map do |g|
          Group.new(g[:length].to_i, g[:copies].to_i, g[:bytes].to_i, g[:hash].to_s, g[:value],
                    Array(g[:sites]).map { |site, n| [site.to_s, n.to_i] })
        end
        new(rows, strings: total[:strings].to_i, bytes: total[:bytes].to_i,
                  duplicate_bytes: total[:duplicate_bytes].to_i, sites: total[:sites].to_s, top: top)
      end

      # From an ObjectSpace.dump_all file (JSON lines, plain or gzip): its
      # STRING records, grouped by their value. A dump without values
      # (Fathom's own, unless written with values: true) cannot be grouped:
      # Fathom::Error says so. contents: show the values (the CLI's
      # --string-contents); off, a group is its length and short hash.
      def self.from_dump(path, contents: false, top: 20)
        DumpScan.new(path, contents: contents).result(top)
      end

      attr_reader :groups

      # sites: where allocation sites came from ("exact", "sampled",
      # "traced", "none").
      def initialize(groups, strings:, bytes:, duplicate_bytes:, sites:, top: 20)
        @groups = groups.sort_by { |g| [-(g.bytes - g.bytes / [g.copies, 1].max), -g.copies, g.hash] }
        @strings = strings
        @bytes = bytes
        @duplicate_bytes = duplicate_bytes
        @sites = sites
        @top = Options.row_limit("top", top)
      end

      def to_s
        mb = ->(b) { Units.format_value(b, "bytes") }
        out = +"Duplicated strings: #{@strings} live strings, #{mb.(@bytes)}; #{mb.(@duplicate_bytes)} is in copies " \
               "(strings with the same bytes as another)\n"
        if @groups.empty?
          out << "No string has a copy.\n"
          return out
        end
        shown = @top ? @groups.first(@top) : @groups
        contents = shown.any?(&:value)
        out << "Strings are shown by length and a hash of their bytes (#xxxx), not their contents " \
               "(#{@contents_hint || "the snapshot's string_contents: true / --string-contents shows them"})\n" unless contents
        out << sites_note
        out << format("%10s %10s %7s  %-12s  %s\n", "copies", "bytes", "length", "string", "where allocated (copies)")
        shown.each do |g|
          name = g.value ? g.value.inspect : "##{g.hash}"
          name = "#{name[0, 40]}…" if name.size > 41
          where = g.sites.empty? ? "-" : g.sites.map { |site, n| "#{short_site(site)} (#{n})" }.join(", ")
          out << format("%10d %10s %7d  %-12s  %s\n", g.copies, mb.(g.bytes), g.length, name, where)
        end
        out << "Showing #{shown.size} of #{@groups.size} duplicated strings\n" if shown.size < @groups.size
        out
      end

      # Says where the last column comes from.
      def sites_note
        case @sites
        when "exact" then ""
        when "sampled" then "where allocated: from the heap profiler's samples (sampled mode: the copies a sample reached)\n"
        when "traced" then "where allocated: from Ruby's allocation tracing\n"
        when "dump" then ""
        else "where allocated: not known (take the snapshot with --mode heap,retention --exact, or a dump with " \
             "ObjectSpace.trace_object_allocations on)\n"
        end
      end

      attr_writer :contents_hint

      private

      # "String#split ← CSV::Parser#parse /usr/lib/ruby/3.1.0/csv/parser.rb:876"
      # (the heap profiler's site: the leaf, then the Ruby line) as the Ruby
      # line alone, its path shortened.
      def short_site(site)
        site.split(" \u2190 ", 2).last.gsub(%r{(?:\S*/)?\S+\.rb}) { |path| Gems.short_path(path) }
      end

      # A streaming pass over a dump's STRING records.
      class DumpScan
        STRING_TYPE = '"type":"STRING"'
        NUMBER = ->(line, key) { line[/"#{key}":(\d+)/, 1] }
        QUOTED = /"value":"((?:[^"\\]|\\.)*)"/.freeze
        FILE = /"file":"((?:[^"\\]|\\.)*)"/.freeze

        def initialize(path, contents:)
          @path = Options.path("path", path)
          @contents = contents
        end

        def result(top)
          groups = {}
          strings = bytes = 0
          with_values = 0
          each_line do |line|
            next unless line.include?(STRING_TYPE)

            length = NUMBER.(line, "bytesize").to_i
            next if length.zero?

            size = NUMBER.(line, "memsize").to_i
            strings += 1
            bytes += size
            raw = line[QUOTED, 1] or next
            with_values += 1
            g = groups[raw.hash ^ length] ||= [0, 0, raw, length, Hash.new(0)]
            g[0] += 1
            g[1] += size
            if (file = line[FILE, 1])
              g[4]["#{unescape(file)}:#{NUMBER.(line, "line")}"] += 1
            end
          end
          if strings.positive? && with_values.zero?
            raise Fathom::Error, "fathom: the dump holds no string contents (Fathom's dumps leave them out " \
                                 "unless written with Fathom.heap_dump(path, values: true); ObjectSpace.dump_all " \
                                 "keeps them), so equal strings cannot be found"
          end
          dups = groups.each_value.select { |g| g[0] > 1 }
          duplicate_bytes = dups.sum { |g| g[1] - g[1] / g[0] }
          picked = dups.max_by(top || dups.size) { |g| [g[1] - g[1] / g[0], g[0]] }
          rows = picked.map do |copies, size, raw, length, sites|
            value = unescape(raw)
            Group.new(length, copies, size, format("%04x", StringCensus.hash16(value.b)),
                      @contents ? StringCensus.value_of(value) : nil,
                      sites.sort_by { |s, n| [-n, s] }.first(StringCensus::SITES_PER_GROUP))
          end
          report = DuplicateStrings.new(rows, strings: strings, bytes: bytes, duplicate_bytes: duplicate_bytes,
                                              sites: groups.each_value.any? { |g| !g[4].empty? } ? "dump" : "none", top: top)
          report.contents_hint = "fathom analyze --strings --string-contents shows them"
          report
        end

        private

        def unescape(raw)
          require "json" # here, not at load (lib/fathom/files/stdlib.rb)
          JSON.parse("\"#{raw}\"")
        rescue JSON::ParserError
          raw
        end

        def each_line(&block)
          require "zlib"
          File.open(@path, "rb") do |f|
            magic = f.read(2)
            f.rewind
            if magic == "\x1f\x8b".b
              Zlib::GzipReader.wrap(f) { |gz| gz.each_line(&block) }
            else
              f.each_line(&block)
            end
          end
        rescue Zlib::Error => e
          raise Fathom::Error, "fathom: not a readable dump (#{e.message})"
        rescue SystemCallError, IOError => e
          raise Fathom::Error, "fathom: cannot read it: #{e.message.scrub.sub(/ @ \w+ - .*\z/, "")}"
        end
      end
    end
  end
end
