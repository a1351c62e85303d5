# frozen_string_literal: true

require_relative "atomic_file"

module Fathom
  # Keeps an always-on directory bounded: at most `keep_files` profiles and
  # `keep_bytes` bytes, the oldest removed first. Only files Fathom created
  # are counted or removed: names of the always-on pattern
  # (<mode>-<pid>-<time>-<index>.pb.gz / .json.gz) whose content Fathom wrote
  # (AtomicFile.written_by_fathom?); anything else in the directory is left
  # alone. Several processes (puma workers) sharing a directory share the
  # bound: each one counts every Fathom file there, and a file another
  # process removed first is simply gone.
  #
  # #make_room is called before each write with the new file's size, so the
  # bound holds after the write too (never N+1 files for a moment). Writers
  # of one process sharing the rotation (one flusher per mode) each leave
  # room for the others' next file too (`writers`), so two of them making
  # room at the same moment still end within the bound.
  class Rotation
    NAME = /\A(?:heap|gc|retention|cpu|wall)-\d+-\d{8}T\d{6}Z-\d+\.(?:pb|json)\.gz\z/.freeze
    FILES_RANGE = (1..1_000_000).freeze

    attr_reader :dir, :keep_files, :keep_bytes, :removed

    def initialize(dir, keep_files:, keep_bytes:, writers: 1)
      @dir = dir
      @keep_files = keep_files
      @keep_bytes = keep_bytes
      @writers = writers
      @removed = 0
    end

    # Removes the oldest files until one more of `incoming` bytes fits.
    # Returns the paths removed.
    def make_room(incoming)
      files = ours
      count = files.size
      total = files.sum { |_, size, _| size }
      gone = []
      files.each do |path, size, _|
        # At least the newest file of each writer stays, whatever the bound.
        break if count + @writers <= @keep_files && total + (incoming * @writers) <= @keep_bytes
        break if count < @writers

        begin
          File.unlink(path)
          gone << path
        rescue Errno::ENOENT
          nil # another process removed it first
        end
        count -= 1
        total -= size
      end
      @removed += gone.size
      gone
    end

    # [[path, size, mtime], ...] of Fathom's files, oldest first (by mtime,
    # then name: the index orders files of the same second).
    def ours
      Dir.children(@dir).filter_map do |name|
        next unless NAME.match?(name)

        path = File.join(@dir, name)
        stat = File.lstat(path)
        next unless stat.file? && AtomicFile.written_by_fathom?(path)

        [path, stat.size, stat.mtime]
      rescue SystemCallError
        nil
      end.sort_by { |path, _, mtime| [mtime, path] }
    rescue SystemCallError
      []
    end
  end
end
