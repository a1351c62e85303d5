# frozen_string_literal: true

require_relative "../error"

module Fathom
  module Files
    # Getting a profile's bytes without trusting them: from a file (a regular
    # file or a pipe, never a device, at most MAX_BYTES) and out of gzip, where
    # a few kilobytes can inflate to gigabytes (a "zip bomb"). Everything that
    # reads a profile (Pprof.read_file, Report, Profile.load, `fathom report`
    # and `fathom diff`) goes through here, so the limits are the same
    # everywhere:
    #
    #   - at most MAX_BYTES (512 MiB) read from a file or inflated from gzip:
    #     more is never a profile the pure-Ruby reader could use (it decodes a
    #     few MB/s and needs far more memory than the bytes);
    #   - gzip may inflate to at most RATIO (100) times its compressed size,
    #     with a floor of FLOOR_BYTES (16 MiB) for small files. Fathom's own
    #     profiles compress 2-10x; only a run of repeated bytes goes past 100x
    #     (deflate's own maximum is ~1032x). Inflating stops as soon as the
    #     limit is passed, so a bomb fails in milliseconds with bounded memory.
    module ProfileBytes
      class Error < Fathom::Error; end

      MAX_BYTES = 512 << 20
      RATIO = 100
      FLOOR_BYTES = 16 << 20
      GZIP_MAGIC = "\x1f\x8b".b.freeze
      CHUNK = 1 << 16

      module_function

      # The inflated size allowed for `compressed_size` bytes of gzip.
      def gunzip_limit(compressed_size)
        [[FLOOR_BYTES, compressed_size * RATIO].max, MAX_BYTES].min
      end

      # The contents of the file at `path` (binary). Raises Error for a
      # directory, a device or a file over MAX_BYTES (the message does not name
      # the path: callers put it first); SystemCallError when it cannot be
      # read (missing, no permission).
      def read_file(path)
        File.open(path, "rb") do |f|
          stat = f.stat
          raise Error, "fathom: a directory, not a profile" if stat.directory?
          # /dev/zero would be read until memory runs out; a pipe is fine
          # (`fathom report <(curl ...)`), the size limit bounds it.
          raise Error, "fathom: a device, not a profile" if stat.chardev? || stat.blockdev?

          bytes = f.read(MAX_BYTES + 1) || "".b
          raise Error, "fathom: larger than #{human(MAX_BYTES)}, not a profile Fathom reads" if bytes.bytesize > MAX_BYTES

          bytes
        end
      end

      # By bytes: String#start_with? raises Encoding::CompatibilityError when
      # the String given is UTF-8 with non-ASCII characters.
      def gzip?(bytes)
        bytes.getbyte(0) == 0x1f && bytes.getbyte(1) == 0x8b
      end

      # Inflates gzip `bytes` (concatenated members too, as gzip(1) and Go's
      # reader do), raising Error once the output passes `limit` (default:
      # gunzip_limit) or when the stream is not valid gzip.
      def gunzip(bytes, limit: gunzip_limit(bytes.bytesize))
        out = +"".b
        rest = bytes
        until rest.empty?
          raise Error, "fathom: data after the gzip stream is not gzip" unless gzip?(rest)

          rest = inflate_member(rest, out, limit)
        end
        out
      end

      # Inflates the gzip member at the start of `bytes` onto `out`; returns
      # the bytes after it.
      def inflate_member(bytes, out, limit)
        require "zlib" # here, not at load (lib/fathom/files/stdlib.rb)
        zs = Zlib::Inflate.new(Zlib::MAX_WBITS + 16) # + 16: a gzip header and trailer, checked
        # With a block, inflate yields every ~16 kB it produces: the limit is
        # checked while inflating, not after a bomb went off.
        zs.inflate(bytes) do |chunk|
          out << chunk
          next if out.bytesize <= limit

          raise Error, "fathom: the gzip data inflates to more than #{human(limit)}, the limit for " \
                       "#{human(bytes.bytesize)} of gzip (#{RATIO} times its size, at least #{human(FLOOR_BYTES)}, " \
                       "at most #{human(MAX_BYTES)}); not a profile Fathom reads"
        end
        raise Error, "fathom: the gzip stream is truncated" unless zs.finished?

        bytes.byteslice(zs.total_in, bytes.bytesize - zs.total_in)
      rescue Zlib::Error => e
        raise Error, "fathom: not a valid gzip stream (#{e.message})"
      ensure
        zs&.close
      end

      # "16MiB"-style sizes for messages.
      def human(bytes)
        unit, factor = [["GiB", 1 << 30], ["MiB", 1 << 20], ["KiB", 1 << 10]].find { |_, f| bytes >= f } || ["B", 1]
        "#{format("%.1f", bytes.to_f / factor).delete_suffix(".0")}#{unit}"
      end
    end
  end
end
