# frozen_string_literal: true

require "zlib"

module Fathom
  class CLI
    # Whether a gzip stream fed in pieces came to its end: `fathom dump`
    # asks it of a reply that has no Content-Length (close-delimited, or
    # re-chunked by a proxy), where a connection cut mid-body otherwise
    # looks like a finished one (Net::HTTP ignores an early EOF by default).
    # A gzip member ends with its CRC and length, which zlib checks, so
    # `ended?` is true only for whole, intact members. Several members one
    # after the other are read as gzip(1) reads them.
    #
    # The inflated bytes are thrown away as they come, 16 kB at a time
    # (Zlib::Inflate#inflate's block), so a gzip bomb costs time in
    # proportion to what it inflates to, never memory.
    class GzipEnd
      # Zlib's window bits for a gzip header and trailer (not zlib's, not raw).
      GZIP_WINDOW = Zlib::MAX_WBITS + 16

      def initialize
        @inflate = Zlib::Inflate.new(GZIP_WINDOW)
        @fed = false
      end

      # Feeds the next bytes; raises Zlib::Error when they are not gzip.
      def <<(bytes)
        rest = bytes.b
        until rest.empty?
          before = @inflate.total_in
          @inflate.inflate(rest) { |_inflated| nil }
          @fed = true
          break unless @inflate.finished?

          # A member ended inside these bytes; what follows is the next one.
          rest = rest.byteslice((@inflate.total_in - before)..)
          next_member unless rest.empty?
        end
        self
      end

      # True when bytes were fed and the last member ended.
      def ended?
        @fed && @inflate.finished?
      end

      def close
        @inflate.close unless @inflate.closed?
      end

      private

      def next_member
        @inflate.close
        @inflate = Zlib::Inflate.new(GZIP_WINDOW)
      end
    end
  end
end
