# frozen_string_literal: true

require_relative "reader"

module Fathom
  module Pprof
    # Encodes a Pprof::Profile (the reader's structs) as pprof protobuf,
    # for what `fathom` writes from Ruby: `fathom merge` and `fathom report
    # --format pprof` (a filtered profile). The native encoder writes every
    # profile a profiler takes; this one only re-encodes decoded ones, so
    # it writes what the reader keeps (a location's mapping is the
    # profile's first; addresses are not kept).
    #
    # Field numbers are those of perftools.profiles.Profile
    # (github.com/google/pprof/proto/profile.proto). Strings are interned
    # into a new table; ids are kept as they are.
    module Writer
      module_function

      # The raw (not gzipped) protobuf bytes.
      def encode(profile)
        Encoder.new(profile).bytes
      end

      # Gzipped, with the header comment that marks a file as Fathom's own
      # (Files::AtomicFile replaces such a file without --force, as it does the
      # native encoder's: core/encode/gzip.h).
      def gzip(profile)
        require "zlib" # here, not at load (lib/fathom/files/stdlib.rb)
        require "stringio"
        io = StringIO.new(+"".b)
        gz = Zlib::GzipWriter.new(io, 6)
        gz.comment = "fathom"
        gz.write(encode(profile))
        gz.close
        io.string
      end

      class Encoder
        def initialize(profile)
          @profile = profile
          @strings = { "" => 0 }
          @table = [""]
        end

        def bytes
          p = @profile
          out = binary
          p.sample_types.each { |type, unit| message(out, 1, value_type(type, unit)) }
          p.samples.each { |s| message(out, 2, sample(s)) }
          mapping_id = p.mappings.keys.min
          p.mappings.each_value { |m| message(out, 3, mapping(m)) }
          p.locations.each { |id, lines| message(out, 4, location(id, lines, mapping_id)) }
          p.functions.each_value { |f| message(out, 5, function(f)) }
          int(out, 7, intern(p.drop_frames)) if p.drop_frames
          int(out, 8, intern(p.keep_frames)) if p.keep_frames
          int(out, 9, p.time_nanos) unless p.time_nanos.to_i.zero?
          int(out, 10, p.duration_nanos) unless p.duration_nanos.to_i.zero?
          message(out, 11, value_type(*p.period_type)) if p.period_type
          int(out, 12, p.period) unless p.period.to_i.zero?
          comments = Array(p.comments).map { |c| intern(c) }
          packed(out, 13, comments) unless comments.empty?
          int(out, 14, intern(p.default_sample_type)) if p.default_sample_type
          # The string table last: every string above is interned by now.
          @table.each { |s| message(out, 6, s) }
          out
        end

        private

        def binary
          String.new(encoding: Encoding::BINARY)
        end

        def intern(string)
          string = string.to_s
          @strings[string] ||= (@table << string).size - 1
        end

        def value_type(type, unit)
          ints(intern(type), intern(unit))
        end

        def sample(s)
          out = binary
          packed(out, 1, s.location_ids)
          packed(out, 2, s.values)
          s.labels.each do |key, value|
            # key, str; or key, (no str), num, num_unit
            label = Array === value ? ints(intern(key), nil, value[0], value[1] && intern(value[1])) : ints(intern(key), intern(value))
            message(out, 3, label)
          end
          out
        end

        def mapping(m)
          # has_functions, has_filenames, has_line_numbers (7-9): the profile
          # is symbolized (the reader keeps no flags; Fathom's profiles all
          # are), so pprof does not try to symbolize it again.
          symbolized = @profile.functions.empty? ? [] : [1, 1, 1]
          ints(m.id, m.memory_start, m.memory_limit, m.file_offset, intern(m.filename), intern(m.build_id), *symbolized)
        end

        def location(id, lines, mapping_id)
          out = ints(id, mapping_id)
          lines.each { |function_id, line| message(out, 4, ints(function_id, line)) }
          out
        end

        def function(f)
          system_name = f.system_name.to_s.empty? ? nil : f.system_name
          ints(f.id, intern(f.name), system_name && intern(system_name), intern(f.filename), f.start_line)
        end

        # A message of varint fields numbered 1, 2, ... in the order given
        # (most of profile.proto's messages are one); nil or zero is left out.
        # Arguments are evaluated in order, so strings are interned in the
        # order the fields are written.
        def ints(*values)
          out = binary
          values.each_with_index { |value, i| int(out, i + 1, value) }
          out
        end

        # A varint field (wire type 0); zero is the default and left out.
        def int(out, field, value)
          return if value.to_i.zero?

          varint(out, field << 3)
          varint(out, value)
        end

        # Length-delimited (wire type 2): a message, string or bytes.
        def message(out, field, bytes)
          varint(out, (field << 3) | 2)
          varint(out, bytes.bytesize)
          out << bytes.b
        end

        # A packed repeated varint field (ids, values, comment indexes).
        def packed(out, field, values)
          return if values.empty?

          body = binary
          values.each { |v| varint(body, v) }
          message(out, field, body)
        end

        # int64 as protobuf writes it: a negative value is its 64-bit
        # two's complement (10 bytes).
        def varint(out, value)
          value += 1 << 64 if value.negative?
          while value >= 0x80
            out << ((value & 0x7f) | 0x80)
            value >>= 7
          end
          out << value
        end
      end
    end
  end
end
