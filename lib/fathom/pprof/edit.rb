# frozen_string_literal: true

require "zlib"
require "stringio"
require_relative "../error"

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
      def apply(bytes, comments: [], default_sample_type: nil)
        raw = bytes.getbyte(0) == 0x1f && bytes.getbyte(1) == 0x8b ? Zlib.gunzip(bytes) : bytes.b
        fields = top_level_fields(raw)
        strings = fields.select { |f| f.number == STRING_TABLE }.map { |f| raw.byteslice(f.offset, f.length) }
        out = +"".b
        kept = fields
        if default_sample_type
          index = strings.index(default_sample_type.to_s.b)
          unless index && sample_type_names(raw, fields, strings).include?(default_sample_type.to_s)
            raise ArgumentError, "fathom: the profile has no sample type #{default_sample_type.to_s.inspect}"
          end

          kept = fields.reject { |f| f.number == DEFAULT_SAMPLE_TYPE }
        end
        kept.each { |f| out << raw.byteslice(f.start, f.stop - f.start) }
        comments.each_with_index do |text, i|
          out << key(STRING_TABLE, 2) << varint(text.bytesize) << text.b
          out << key(COMMENT, 0) << varint(strings.size + i)
        end
        out << key(DEFAULT_SAMPLE_TYPE, 0) << varint(index) if default_sample_type
        gzip(out)
      end

      # [start_ns, duration_ns] of the profile (0 when unset).
      def time_window(bytes)
        raw = bytes.getbyte(0) == 0x1f && bytes.getbyte(1) == 0x8b ? Zlib.gunzip(bytes) : bytes.b
        fields = top_level_fields(raw)
        [TIME_NANOS, DURATION_NANOS].map { |n| fields.reverse.find { |f| f.number == n }&.value || 0 }
      end

      # One top-level field: its number, its varint value (wire type 0), its
      # payload (offset, length) for length-delimited ones, and the byte
      # range of the whole field (key included).
      Field = Struct.new(:number, :value, :offset, :length, :start, :stop)

      def top_level_fields(raw)
        pos = 0
        fields = []
        while pos < raw.bytesize
          start = pos
          tag, pos = read_varint(raw, pos)
          value = offset = length = nil
          case tag & 7
          when 0 then value, pos = read_varint(raw, pos)
          when 2
            length, pos = read_varint(raw, pos)
            offset = pos
            pos += length
          when 1 then pos += 8
          when 5 then pos += 4
          else raise Fathom::Error, "fathom: not a pprof profile (wire type #{tag & 7})"
          end
          raise Fathom::Error, "fathom: truncated pprof profile" if pos > raw.bytesize

          fields << Field.new(tag >> 3, value, offset, length, start, pos)
        end
        fields
      end

      def sample_type_names(raw, fields, strings)
        fields.select { |f| f.number == SAMPLE_TYPE }.map do |f|
          sub = raw.byteslice(f.offset, f.length)
          pos = 0
          type = nil
          while pos < sub.bytesize
            tag, pos = read_varint(sub, pos)
            value, pos = read_varint(sub, pos)
            type = value if tag >> 3 == 1
          end
          strings[type.to_i]&.force_encoding(Encoding::UTF_8)
        end
      end

      def read_varint(raw, pos)
        value = 0
        shift = 0
        loop do
          byte = raw.getbyte(pos) or raise Fathom::Error, "fathom: truncated pprof profile"
          pos += 1
          value |= (byte & 0x7f) << shift
          return [value, pos] if byte < 0x80

          shift += 7
        end
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
