# frozen_string_literal: true

require_relative "../error"
require_relative "../files/profile_bytes"

module Fathom
  # A pure-Ruby reader for pprof profiles (perftools.profiles.Profile, see
  # github.com/google/pprof/proto/profile.proto), gzipped or raw. It decodes
  # into plain structs with every string-table index already resolved.
  #
  # The bytes are not trusted: anything that is not a well-formed profile
  # raises DecodeError (a Fathom::Error) saying what is wrong and where —
  # an empty input, gzip that inflates past Files::ProfileBytes' limits, malformed
  # protobuf (truncation, field 0, varints past 64 bits, lengths past their
  # message), indexes into the string table or ids of locations and
  # functions that do not exist. Strings that are not valid UTF-8 are kept
  # with the bad bytes replaced (pprof does not check them either).
  module Pprof
    class DecodeError < Fathom::Error; end

    # location_ids: leaf first. values: one per sample type.
    # labels: {"key" => "string"} or {"key" => [number, unit_or_nil]}.
    Sample = Struct.new(:location_ids, :values, :labels)
    Function = Struct.new(:id, :name, :system_name, :filename, :start_line)
    Mapping = Struct.new(:id, :memory_start, :memory_limit, :file_offset, :filename, :build_id)

    # sample_types: [[type, unit], ...]; period_type: [type, unit] or nil.
    # locations: {id => [[function_id, line], ...]} (innermost inlined line first).
    # functions: {id => Function}; mappings: {id => Mapping}.
    # default_sample_type: a type name or nil. comments: [String].
    Profile = Struct.new(:sample_types, :samples, :locations, :functions, :mappings, :string_table,
                         :time_nanos, :duration_nanos, :period_type, :period, :default_sample_type,
                         :comments, :drop_frames, :keep_frames) do
      def sample_type_names
        sample_types.map(&:first)
      end

      # Index of a sample type by name, or nil.
      def sample_type_index(name)
        sample_types.index { |type, _| type == name }
      end

      # Function names of a sample's stack, leaf first (inlined frames expanded).
      def stack_names(sample)
        names = []
        sample.location_ids.each do |loc_id|
          locations.fetch(loc_id).each { |function_id, _line| names << function_name(function_id) }
        end
        names
      end

      def function_name(function_id)
        fn = functions[function_id]
        fn ? fn.name : "<unknown function #{function_id}>"
      end
    end

    GZIP_MAGIC = Files::ProfileBytes::GZIP_MAGIC

    module_function

    # Decodes a profile from its bytes (a String, gzipped or not) or from the
    # file a Pathname names. A String is always bytes, never a path: a file
    # whose content happens to look like a path must not be followed
    # (read_file takes a path String).
    def read(bytes_or_path)
      if String === bytes_or_path
        decode(bytes_or_path)
      elsif Kernel.instance_method(:respond_to?).bind_call(bytes_or_path, :to_path)
        path = bytes_or_path.to_path
        raise TypeError, "fathom: Pprof.read(bytes_or_path): to_path must return a String, got #{path.class}" unless String === path

        read_file(path)
      else
        raise TypeError, "fathom: Pprof.read(bytes_or_path) needs profile bytes (a String) or a Pathname, " \
                         "got #{Kernel.instance_method(:class).bind_call(bytes_or_path)}"
      end
    end

    # A file that cannot be opened raises SystemCallError; one that is not a
    # profile (a device, too large, not pprof) DecodeError naming the path.
    def read_file(path)
      decode(Files::ProfileBytes.read_file(path))
    rescue Fathom::Error => e
      raise DecodeError, e.message.scrub.sub(/\A(fathom: )?/, "fathom: #{path}: ")
    end

    def decode(bytes)
      raise TypeError, "fathom: profile bytes must be a String, got #{bytes.class}" unless String === bytes
      # pprof's own reader refuses empty input too ("empty input file").
      raise DecodeError, "fathom: the profile is empty (0 bytes)" if bytes.empty?

      bytes = bytes.b
      if Files::ProfileBytes.gzip?(bytes)
        begin
          bytes = Files::ProfileBytes.gunzip(bytes)
        rescue Files::ProfileBytes::Error => e
          raise DecodeError, e.message
        end
        raise DecodeError, "fathom: the profile is empty (a gzip of 0 bytes)" if bytes.empty?
      end
      Decoder.new(bytes).profile
    end

    # The protobuf wire-format decoder. It walks one binary String with an
    # integer cursor (@pos) and never slices out sub-messages, so the only
    # objects it allocates are the results. Varint reads are inlined in the
    # hot loops (packed ids and values) because method calls dominate there.
    class Decoder
      TWO_63 = 1 << 63
      TWO_64 = 1 << 64

      def initialize(buf)
        @buf = buf
        @pos = 0
      end

      def profile
        strings = []
        # Sub-messages that need the string table (written after them by most
        # encoders) are remembered as [start, end) offsets and decoded after.
        sample_types = []
        samples = []
        locations = []
        functions = []
        mappings = []
        period_type = nil
        comment_ids = []
        scalars = Hash.new(0)
        limit = @buf.bytesize
        while @pos < limit
          k = varint
          wire = k & 7
          case (field = k >> 3)
          when 0 then error("field number 0 (not protobuf)")
          when 1 then sample_types << message_range(wire)
          when 2
            # The most frequent field: two flat Integers instead of a pair.
            stop = length_limit(wire)
            samples << @pos << stop
            @pos = stop
          when 3 then mappings << message_range(wire)
          when 4 then locations << message_range(wire)
          when 5 then functions << message_range(wire)
          when 6 then strings << string(wire)
          when 7, 8, 9, 10, 12, 14 then scalars[field] = int64(wire)
          when 11 then period_type = message_range(wire)
          when 13 then repeated_int64(wire, comment_ids)
          else skip(wire)
          end
        end
        strings = [""] if strings.empty?
        raise DecodeError, "fathom: string_table[0] must be empty" unless strings[0].empty?

        @strings = strings
        types = sample_types.map { |s, e| value_type(s, e) }
        profile = Profile.new(
          types,
          decode_samples(samples, types.size),
          locations.each_with_object({}) { |(s, e), h| location(s, e, h) },
          functions.each_with_object({}) { |(s, e), h| function(s, e, h) },
          mappings.each_with_object({}) { |(s, e), h| mapping(s, e, h) },
          strings,
          scalars[9], scalars[10],
          period_type && value_type(*period_type),
          scalars[12],
          scalars[14].zero? ? nil : str(scalars[14]),
          comment_ids.map { |i| str(i) },
          scalars[7].zero? ? nil : str(scalars[7]),
          scalars[8].zero? ? nil : str(scalars[8])
        )
        check_references(profile)
        profile
      end

      private

      def error(message)
        raise DecodeError, "fathom: not a pprof profile: malformed data at byte #{@pos}: #{message}"
      end

      # Indexes come from int64 fields too: a negative one must not count
      # from the end, a huge one must not reach Array#fetch (RangeError).
      def str(index)
        return @strings[index] if index >= 0 && index < @strings.size

        error("string index #{index} out of range (table has #{@strings.size})")
      end

      # One and two bytes (ids below 16384, most values) are read inline:
      # a method call per varint cost the reader ~8%.
      def varint
        buf = @buf
        pos = @pos
        b = buf.getbyte(pos) or error("truncated varint")
        if b < 0x80
          @pos = pos + 1
          return b
        end
        b2 = buf.getbyte(pos + 1)
        if b2 && b2 < 0x80
          @pos = pos + 2
          return (b & 0x7f) | (b2 << 7)
        end
        varint_rest(b, pos + 1, buf.bytesize, "truncated varint")
      end

      # The bytes after a varint's first (`first`, read before `pos`), up to
      # `limit`; leaves @pos after the last. One loop for plain and packed
      # varints: the one-byte case, most of them, stays inline in each.
      def varint_rest(first, pos, limit, truncated)
        buf = @buf
        result = first & 0x7f
        shift = 7
        while true # rubocop:disable Style/InfiniteLoop -- `loop` costs a block call per byte
          error(truncated) if pos >= limit
          b = buf.getbyte(pos)
          pos += 1
          result |= (b & 0x7f) << shift
          break if b < 0x80

          shift += 7
          error("varint longer than 10 bytes") if shift > 63
        end
        @pos = pos
        # A 10th byte carries bit 63 only: more would not fit in 64 bits.
        error("varint overflows 64 bits") if shift == 63 && b > 1
        result
      end

      # int64 fields are two's complement in 10-byte varints when negative.
      def int64(wire)
        error("expected a varint, got wire type #{wire}") unless wire.zero?
        v = varint
        v >= TWO_63 ? v - TWO_64 : v
      end

      def key
        k = varint
        [k >> 3, k & 7]
      end

      def length_limit(wire)
        error("expected a length-delimited field, got wire type #{wire}") unless wire == 2
        len = varint
        stop = @pos + len
        error("length #{len} runs past the end") if stop > @buf.bytesize
        stop
      end

      def message_range(wire)
        stop = length_limit(wire)
        start = @pos
        @pos = stop
        [start, stop]
      end

      def string(wire)
        stop = length_limit(wire)
        s = @buf.byteslice(@pos, stop - @pos).force_encoding(Encoding::UTF_8)
        # Reports split, match and print these: invalid bytes would raise
        # ArgumentError there, far from the file that had them.
        s = s.scrub unless s.valid_encoding?
        @pos = stop
        s.freeze
      end

      def skip(wire)
        case wire
        when 0 then varint
        when 1 then @pos += 8
        when 2 then @pos = length_limit(2)
        when 5 then @pos += 4
        else error("unsupported wire type #{wire}")
        end
        error("field runs past the end") if @pos > @buf.bytesize
      end

      # Appends one (unpacked) or many (packed) varints to `into`.
      # signed: convert int64 two's complement.
      def repeated_varints(wire, into, signed)
        if wire.zero?
          v = varint
          into << (signed && v >= TWO_63 ? v - TWO_64 : v)
          return
        end
        stop = length_limit(wire)
        buf = @buf
        pos = @pos
        while pos < stop
          b = buf.getbyte(pos)
          pos += 1
          if b < 0x80
            into << b
            next
          end
          b2 = pos < stop ? buf.getbyte(pos) : 0x80
          if b2 < 0x80 # two bytes, inline as in #varint
            pos += 1
            into << ((b & 0x7f) | (b2 << 7))
            next
          end
          @pos = pos - 1 # where an error says the bad varint starts
          v = varint_rest(b, pos, stop, "truncated packed varint")
          pos = @pos
          into << (signed && v >= TWO_63 ? v - TWO_64 : v)
        end
        @pos = pos
      end

      def repeated_int64(wire, into)
        repeated_varints(wire, into, true)
      end

      def value_type(start, stop)
        @pos = start
        type = unit = 0
        while @pos < stop
          field, wire = key
          case field
          when 1 then type = int64(wire)
          when 2 then unit = int64(wire)
          else skip(wire)
          end
        end
        check_end(stop)
        [str(type), str(unit)]
      end

      def decode_samples(ranges, type_count)
        out = Array.new(ranges.size / 2)
        i = 0
        while i < out.size
          out[i] = sample(ranges[2 * i], ranges[2 * i + 1], type_count)
          i += 1
        end
        out
      end

      def sample(start, stop, type_count)
        @pos = start
        locs = []
        values = []
        labels = {}
        while @pos < stop
          k = varint
          wire = k & 7
          case k >> 3
          when 1 then repeated_varints(wire, locs, false)
          when 2 then repeated_varints(wire, values, true)
          when 3 then label(length_limit(wire), labels)
          else skip(wire)
          end
        end
        check_end(stop)
        if values.size != type_count
          error("sample has #{values.size} values but the profile has #{type_count} sample types")
        end
        Sample.new(locs, values, labels)
      end

      def label(stop, labels)
        key_id = str_id = num = unit = 0
        has_num = false
        while @pos < stop
          k = varint
          field = k >> 3
          if field.between?(1, 4) && (k & 7).zero?
            v = varint
            case field
            when 1 then key_id = v
            when 2 then str_id = v
            when 3
              num = v >= TWO_63 ? v - TWO_64 : v
              has_num = true
            else unit = v
            end
          else
            skip(k & 7)
          end
        end
        check_end(stop)
        # A label with a num and no str is numeric (pprof's own rule).
        labels[str(key_id)] = str_id.zero? && has_num ? [num, unit.zero? ? nil : str(unit)] : str(str_id)
      end

      def location(start, stop, into)
        @pos = start
        id = 0
        lines = []
        while @pos < stop
          field, wire = key
          case field
          when 1 then id = varint_field(wire)
          when 4 then lines << line(length_limit(wire))
          else skip(wire) # mapping_id, address, is_folded: not needed by the reports
          end
        end
        check_end(stop)
        error("location id 0 is reserved") if id.zero?
        into[id] = lines
      end

      def line(stop)
        function_id = line_no = 0
        while @pos < stop
          k = varint
          wire = k & 7
          case k >> 3
          when 1 then function_id = varint_field(wire)
          when 2 then line_no = int64(wire)
          else skip(wire)
          end
        end
        check_end(stop)
        [function_id, line_no]
      end

      def function(start, stop, into)
        f = scalar_fields(start, stop, 5)
        error("function id 0 is reserved") if f[0].zero?
        into[f[0]] = Function.new(f[0], str(f[1]), str(f[2]), str(f[3]), f[4])
      end

      def mapping(start, stop, into)
        m = scalar_fields(start, stop, 6)
        into[m[0]] = Mapping.new(m[0], m[1], m[2], m[3], str(m[4]), str(m[5]))
      end

      # A message whose fields 1..count are all integer scalars (Function,
      # and the parts of Mapping we keep): their values, 0 when absent.
      def scalar_fields(start, stop, count)
        @pos = start
        values = Array.new(count, 0)
        while @pos < stop
          field, wire = key
          if field.between?(1, count)
            values[field - 1] = int64(wire)
          else
            skip(wire)
          end
        end
        check_end(stop)
        values
      end

      def varint_field(wire)
        error("expected a varint, got wire type #{wire}") unless wire.zero?
        varint
      end

      def check_end(stop)
        error("sub-message overruns its length") if @pos != stop
      end

      # Every report expands each sample's stack into function names (a
      # location's lines, inlined ones included). A small file can ask for a
      # huge expansion: one location of 50,000 lines under 50,000 samples is
      # 2.5e9 frames from 800 kB, hours of work for a report. Fathom's own
      # profiles expand to under 1 frame and ~10 bytes of names per byte of
      # protobuf; the limits leave room for far deeper stacks and longer
      # names (and every report is linear in them).
      FRAMES_PER_BYTE = 4
      MIN_FRAMES = 2_000_000
      NAME_BYTES_PER_BYTE = 64
      MIN_NAME_BYTES = 128 << 20

      def check_references(profile)
        functions = profile.functions
        # location id => [frames, bytes of names] that it expands to
        cost = {}
        profile.locations.each do |loc_id, lines|
          text = 0
          lines.each do |function_id, _|
            if (fn = functions[function_id])
              text += fn.name.bytesize
            elsif function_id.zero?
              text += 24 # "<unknown function 0>"
            else
              raise DecodeError, "fathom: not a pprof profile: location #{loc_id} refers to missing function #{function_id}"
            end
          end
          cost[loc_id] = lines.empty? ? [1, 16] : [lines.size, text] # "<location N>"
        end
        frames = text = 0
        profile.samples.each do |s|
          s.location_ids.each do |id|
            c = cost[id] or raise DecodeError, "fathom: not a pprof profile: a sample refers to missing location #{id}"
            frames += c[0]
            text += c[1]
          end
        end
        check_expansion(frames, text)
      end

      def check_expansion(frames, text)
        size = @buf.bytesize
        return if frames <= FRAMES_PER_BYTE * size + MIN_FRAMES && text <= NAME_BYTES_PER_BYTE * size + MIN_NAME_BYTES

        raise DecodeError, "fathom: not a usable pprof profile: its #{size} bytes expand to #{frames} stack frames " \
                           "(#{text} bytes of function names), more than Fathom reads for a profile of this size " \
                           "(#{FRAMES_PER_BYTE} frames and #{NAME_BYTES_PER_BYTE} bytes of names per byte, " \
                           "at least #{MIN_FRAMES} and #{MIN_NAME_BYTES >> 20} MiB)"
      end
    end
  end
end
