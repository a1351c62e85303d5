# frozen_string_literal: true

require_relative "atomic_file"
require_relative "options"
require_relative "pprof/reader"
require_relative "report/top"

module Fathom
  # One encoded profile: gzipped pprof bytes plus the collector's statistics
  # about how it was produced.
  class Profile
    attr_reader :bytes, :stats, :path

    # Reads a profile written earlier (no stats are stored in the file).
    def self.load(path)
      new(File.binread(path), {}, path: File.expand_path(path))
    end

    def initialize(bytes, stats = {}, path: nil)
      raise TypeError, "fathom: profile bytes must be a String, got #{bytes.class}" unless bytes.is_a?(String)

      @bytes = bytes
      @stats = (stats || {}).freeze
      @path = path
    end

    # Writes the profile atomically; returns the absolute path.
    def write(path)
      @path = AtomicFile.write(Options.path("path", path), @bytes)
    end

    # The decoded profile (Fathom::Pprof::Profile), decoded once.
    def decode
      @decode ||= Pprof.read(@bytes)
    end

    # The `pprof -top`-style table as a String.
    def report(sample_index: nil, top: 20)
      Report::Top.new(decode, sample_index: sample_index, top: top).to_s
    end

    def to_s
      parts = ["#{@bytes.bytesize} bytes gzipped"]
      parts << "#{@stats[:samples]} samples (#{@stats[:live_samples]} live)" if @stats.key?(:samples)
      parts << "flushed in #{Options.format_ns(@stats[:flush_ns])}" if @stats[:flush_ns]
      parts << "written to #{@path}" if @path
      "Fathom heap profile: #{parts.join(", ")}"
    end

    def inspect
      "#<#{self.class} #{self}>"
    end
  end
end
