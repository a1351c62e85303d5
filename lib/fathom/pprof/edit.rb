# frozen_string_literal: true

require_relative "../error"
require_relative "../files/profile_bytes"

module Fathom
  module Pprof
    # Small edits to a pprof profile Fathom has just encoded, without
    # decoding it: extra comments (Profile.comment, field 13) and another
    # default sample type (Profile.default_sample_type, field 14). Used by
    # the Rack endpoints (`allocs` is the heap profile with alloc_space as
    # its default, as Go's /debug/pprof/allocs) and by always-on files, which
    # carry pid, hostname, time window and Ruby version (ProcessComments).
    #
    # Only the top-level fields are walked: samples, locations and functions
    # are length-delimited and skipped whole, so an edit costs one gunzip and
    # one gzip of the profile. Appending works because protobuf concatenates
    # repeated fields in order: new strings go at the end of the string
    # table, new comments after the existing ones. The result is gzipped
    # with Fathom's header comment, so AtomicFile still knows it as
    # Fathom's file. Input must be Fathom's own output (trusted): this is
    # not a reader for untrusted bytes (Pprof.read is).
    module Edit
      STRING_TABLE = 6
      TIME_NANOS = 9
      DURATION_NANOS = 10
      COMMENT = 13
      DEFAULT_SAMPLE_TYPE = 14
      SAMPLE_TYPE = 1

      module_function

      # Returns new gzipped bytes. comments: Strings to add;
      # default_sample_type: a sample type name the profile has (ArgumentError
      # otherwise), or nil to keep the current one.
      #
      # No Ruby object per field: a retention profile has tens of thousands
      # of top-level fields (every sample, location, function and string is
      # one), and a Struct (plus a String slice per string) for each, all
      # alive until the end, made puma's Ruby heap grow from 221 to 319 pages
      # at the first retention fetch under load (bench/rack_load.rb), pages
      # Ruby kept. Fields are yielded as Integers; strings are compared in place.
      def apply(bytes, comments: [], default_sample_type: nil)
        raw = plain(bytes)
        string_count = 0
        each_field(raw) { |number| string_count += 1 if number == STRING_TABLE }
        out = +"".b
        if default_sample_type
          index = sample_type_index(raw, default_sample_type.to_s.b)
          raise ArgumentError, "fathom: the profile has no sample type #{default_sample_type.to_s.inspect}" unless index

          # Everything but the old default_sample_type fields, in order.
          copied = 0
          each_field(raw) do |number, _, _, _, start, stop|
            next unless number == DEFAULT_SAMPLE_TYPE

            out << raw.byteslice(copied, start - copied)
            copied = stop
          end
          out << raw.byteslice(copied, raw.bytesize - copied)
        else
          out << raw
        end
        comments.each_with_index do |text, i|
          out << key(STRING_TABLE, 2) << varint(text.bytesize) << text.b
          out << key(COMMENT, 0) << varint(string_count + i)
        end
        out << key(DEFAULT_SAMPLE_TYPE, 0) << varint(index) if default_sample_type
        gzip(out)
      end

      # [start_ns, duration_ns] of the profile (0 when unset; the last
      # occurrence wins, as protobuf says).
      def time_window(bytes)
        raw = plain(bytes)
        start_ns = duration_ns = 0
        each_field(raw) do |number, value|
          start_ns = value if number == TIME_NANOS
          duration_ns = value if number == DURATION_NANOS
        end
        [start_ns, duration_ns]
      end

      # Yields each top-level field as Integers: its number, its varint
      # value (wire type 0, else nil), its payload's offset and length
      # (length-delimited, else nil), and the byte range of the whole field
      # (key included) as start, stop.
      def each_field(raw)
        pos = 0
        size = raw.bytesize
        # A closure over pos, not a method returning [value, pos]: that
        # Array per varint came to a million objects per retention profile.
        # (Nor a `return` inside it: that allocates a throw object each time.)
        varint = lambda do
          value = 0
          shift = 0
          byte = 0x80
          while byte >= 0x80
            byte = raw.getbyte(pos) or raise Fathom::Error, "fathom: truncated pprof profile"
            pos += 1
            value |= (byte & 0x7f) << shift
            shift += 7
          end
          value
        end
        while pos < size
          start = pos
          tag = varint.call
          value = offset = length = nil
          case tag & 7
          when 0 then value = varint.call
          when 2
            length = varint.call
            offset = pos
            pos += length
          when 1 then pos += 8
          when 5 then pos += 4
          else raise Fathom::Error, "fathom: not a pprof profile (wire type #{tag & 7})"
          end
          raise Fathom::Error, "fathom: truncated pprof profile" if pos > size

          yield tag >> 3, value, offset, length, start, pos
        end
      end

      # The string table index of `name` if it is one of the profile's
      # sample types (Profile.sample_type: ValueType, whose field 1 is the
      # type's string index), else nil.
      def sample_type_index(raw, name)
        type_indexes = []
        each_field(raw) do |number, _, offset, length|
          next unless number == SAMPLE_TYPE

          each_field(raw.byteslice(offset, length)) { |field, value| type_indexes << value if field == 1 }
        end
        i = -1
        each_field(raw) do |number, _, offset, length|
          next unless number == STRING_TABLE

          i += 1
          next unless length == name.bytesize && type_indexes.include?(i) && raw.byteslice(offset, length) == name

          return i
        end
        nil
      end

      # The protobuf bytes of a profile, gzipped (Fathom's own output,
      # trusted: no inflate limit) or not.
      def plain(bytes)
        require "zlib" # here, not at load (lib/fathom/files/stdlib.rb)
        ProfileBytes.gzip?(bytes) ? Zlib.gunzip(bytes) : bytes.b
      end

      def varint(value)
        out = +"".b
        loop do
          byte = value & 0x7f
          value >>= 7
          return out << (byte | (value.zero? ? 0 : 0x80)) if value.zero?

          out << (byte | 0x80)
        end
      end

      def key(field, wire)
        varint((field << 3) | wire)
      end

      # Gzip with the "fathom" header comment (core/encode/gzip.h does the
      # same), so that the result is recognized as Fathom's file.
      def gzip(raw)
        require "zlib"
        require "stringio"
        io = StringIO.new(+"".b)
        gz = Zlib::GzipWriter.new(io, Zlib::DEFAULT_COMPRESSION)
        gz.comment = "fathom"
        gz.mtime = 0
        gz.write(raw)
        gz.close
        io.string
      end
    end
  end
end
