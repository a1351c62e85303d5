# frozen_string_literal: true

module Fathom
  # Duplicated strings in a live heap, for a retention snapshot
  # (`fathom report retained.pb.gz --strings`): strings with the same
  # bytes, how many copies, the bytes they hold, and where they were
  # allocated when something knows (the heap profiler of the same run, or
  # Ruby's allocation tracing).
  #
  # Contents stay out unless asked (the snapshot's string_contents:, the
  # CLI's --string-contents, the rule for every program string Fathom
  # writes: docs/internals/retention.md, "String contents stay out of
  # profiles"): a group is its length, its copies and a short hash of its
  # bytes, "#8bcd" (16 bits of FNV-1a, the hash a String hash key's shape
  # shows, so the same string has the same name in both). Strings are
  # grouped in the process by Ruby's own String#hash (seeded per process,
  # never written) and length; only the short hash leaves it.
  #
  # The census runs a full GC, then walks every String
  # (ObjectSpace.each_object) holding the GVL: about 0.5 s per million
  # strings, which is why a snapshot takes
  # it only when asked (`strings: true`), and at the end of `fathom run`
  # and Fathom.profile(mode: :retention), where a pause costs nothing.
  #
  # Its result rides in the profile as comments, one JSON object each:
  #   fathom.strings.total {"strings":N,"bytes":B,"groups":G,"duplicate_bytes":D,"sites":"exact"}
  #   fathom.strings {"length":7,"copies":40000,"bytes":1600000,"hash":"1a2b","sites":[["site",39990],...]}
  module StringCensus
    COMMENT = "fathom.strings"
    TOTAL_COMMENT = "fathom.strings.total"
    TOP = 30
    SITES_PER_GROUP = 3
    # Of a string's value, at most this much is written (string_contents).
    VALUE_BYTES = 64
    # Live objects asked of the heap profiler for sites.
    LIVE_LIMIT = 5_000_000

    module_function

    # The comment lines for the heap as it is now. heap_profiler: a
    # HeapProfiler of the same run, whose live records say where strings
    # were allocated (exact mode: every string since it started; sampled:
    # some), or nil.
    def comments(string_contents: false, heap_profiler: nil, top: TOP)
      # each_object also yields what is garbage but not yet swept (the
      # site Strings Retention.explain_sites just made, 12,000 copies of
      # "String#split ← ..."): collect it first.
      GC.start
      require "json" # here, not at load (lib/fathom/files/stdlib.rb)
      groups, totals = count
      picked = groups.select { |_, g| g[0] > 1 }.max_by(top) { |_, g| [g[1] - g[1] / g[0], g[0]] }.to_h
      sites, source = sites_of(picked, heap_profiler)
      lines = []
      dup_bytes = groups.each_value.sum { |g| g[0] > 1 ? g[1] - g[1] / g[0] : 0 }
      lines << "#{TOTAL_COMMENT} #{JSON.generate(strings: totals[0], bytes: totals[1], groups: groups.size,
                                                  duplicate_bytes: dup_bytes, sites: source)}"
      picked.each do |key, (copies, bytes, example)|
        record = { length: example.bytesize, copies: copies, bytes: bytes, hash: format("%04x", hash16(example)) }
        record[:sites] = sites[key].sort_by { |s, n| [-n, s] }.first(SITES_PER_GROUP) if sites[key]
        record[:value] = value_of(example) if string_contents
        lines << "#{COMMENT} #{JSON.generate(record)}"
      end
      lines
    ensure
      # A stale word on the C stack that still points at one of these
      # would make its strings look held to the snapshot that follows
      # (the conservative root): leave them empty.
      groups&.clear
      picked&.clear
      sites&.each_value(&:clear)&.clear
    end

    # A snapshot's stamp ([lines, default sample type], or nil) with the
    # census's comments added. A census that fails leaves the snapshot as
    # it would be without it (and says why in a comment).
    def stamp(stamp, **opts)
      lines, default = stamp
      [[*Array(lines), *comments(**opts)], default]
    rescue StandardError => e
      [[*Array(lines), "#{COMMENT}.failed #{e.class}: #{e.message}"[0, 300]], default]
    end

    # {String#hash ^ length => [copies, bytes, an example]} and
    # [strings, bytes] over every String.
    def count
      memsize = memsize_function
      groups = {}
      strings = bytes = 0
      ObjectSpace.each_object(String) do |s|
        length = s.bytesize
        next if length.zero?

        size = memsize.call(s)
        strings += 1
        bytes += size
        # One Integer, not a [length, hash] pair: no allocation per string
        # (two strings of different bytes share a key 1 in 2^62 times).
        g = groups[s.hash ^ length] ||= [0, 0, s]
        g[0] += 1
        g[1] += size
      end
      [groups, [strings, bytes]]
    end

    # ObjectSpace.memsize_of when objspace is loaded (it is part of Ruby;
    # loading it only for this is not worth changing the program), else
    # the slot and the heap buffer of a string too long to embed.
    def memsize_function
      return ObjectSpace.method(:memsize_of) if ObjectSpace.respond_to?(:memsize_of)

      slot = 40
      ->(s) { s.bytesize > 23 ? slot + s.bytesize + 1 : slot }
    end

    # {group key => {site => copies}} for the picked groups, and where the
    # sites came from: "exact" or "sampled" (the heap profiler), "traced"
    # (ObjectSpace.trace_object_allocations), or "none".
    def sites_of(picked, heap_profiler)
      return [{}, "none"] if picked.empty?

      if heap_profiler
        live = heap_profiler.live_objects(limit: LIVE_LIMIT)
        # Identity only: a live record's object may be one of Ruby's
        # internal objects (an imemo, a hidden string), on which no method
        # may be called, not even ===. Strings are looked up from
        # ObjectSpace.each_object(String) below.
        by_object = {}.compare_by_identity
        live.each { |site, obj| by_object[obj] = site }
        live.each(&:clear).clear
        source = heap_profiler.exact ? "exact" : "sampled"
        found = tally(picked) { |s| by_object[s] }
        by_object.clear
        return [found, source]
      end
      if ObjectSpace.respond_to?(:allocation_sourcefile)
        traced = tally(picked) do |s|
          file = ObjectSpace.allocation_sourcefile(s)
          file && "#{file}:#{ObjectSpace.allocation_sourceline(s)}"
        end
        return [traced, "traced"] unless traced.empty?
      end
      [{}, "none"]
    end

    def tally(picked)
      out = {}
      ObjectSpace.each_object(String) do |s|
        length = s.bytesize
        next if length.zero?

        key = s.hash ^ length
        next unless picked.key?(key)

        site = yield(s) or next
        (out[key] ||= Hash.new(0))[site] += 1
      end
      out
    end

    # FNV-1a 32-bit, xor-folded to 16 bits: core/retention/key_shape.cc's KeyHash16.
    def hash16(string)
      h = 2_166_136_261
      string.each_byte do |b|
        h ^= b
        h = (h * 16_777_619) & 0xffff_ffff
      end
      (h >> 16) ^ (h & 0xffff)
    end

    def value_of(string)
      v = string.byteslice(0, VALUE_BYTES).dup.force_encoding(Encoding::UTF_8).scrub
      string.bytesize > VALUE_BYTES ? "#{v}…" : v
    end

    # The census of a profile's comments: [totals Hash or nil, [group
    # Hash]] with symbol keys.
    def parse(comments)
      total = nil
      groups = []
      Array(comments).each do |c|
        if c.start_with?("#{TOTAL_COMMENT} ")
          total = parse_json(c.delete_prefix("#{TOTAL_COMMENT} "))
        elsif c.start_with?("#{COMMENT} ")
          g = parse_json(c.delete_prefix("#{COMMENT} "))
          groups << g if g
        end
      end
      [total, groups]
    end

    def parse_json(text)
      require "json" # here, not at load (lib/fathom/files/stdlib.rb)
      value = JSON.parse(text, symbolize_names: true)
      Hash === value ? value : nil
    rescue JSON::ParserError
      nil
    end
  end
end
