# frozen_string_literal: true

module Fathom
  module Report
    # Source lines for `--by line` and `--method`, read from the files the
    # profile names, on the machine that prints the report (a profile
    # carries file names and line numbers, never source). A file that is
    # gone, not a regular file, unreadable or over MAX_BYTES gives nil:
    # the report then prints the row without its code.
    class Source
      MAX_BYTES = 4 << 20

      def initialize
        @files = {}
      end

      # The lines of `path` (an Array, line 1 at index 0), or nil.
      def lines(path)
        return nil if path.nil? || path.empty?

        @files.fetch(path) do
          @files[path] = begin
            stat = File.stat(path)
            stat.file? && stat.size <= MAX_BYTES ? File.binread(path).force_encoding(Encoding::UTF_8).scrub.lines.map(&:chomp) : nil
          rescue SystemCallError, IOError, ArgumentError
            nil
          end
        end
      end

      # Line `number` of `path`, stripped and cut to `width` characters
      # (control characters escaped), or nil.
      def line(path, number, width = 70)
        text = lines(path)&.[](number - 1) if number.to_i.positive?
        return nil unless text

        text = text.strip.gsub(/[[:cntrl:]]/) { |c| c == "\t" ? " " : format("\\x%02x", c.ord) }
        text.size > width ? "#{text[0, width - 1]}…" : text
      end
    end
  end
end
