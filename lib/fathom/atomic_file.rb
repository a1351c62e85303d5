# frozen_string_literal: true

require "fileutils"
require "securerandom"

module Fathom
  # Writes whole files so that readers see either the old content or the new
  # one, never a prefix: the data goes to a temporary file in the same
  # directory (a rename is only atomic within one file system), is fsynced,
  # and is then renamed over the destination.
  module AtomicFile
    module_function

    # Writes `data` (a String, written as binary) to `path`, creating parent
    # directories. Returns the absolute path written.
    def write(path, data)
      path = File.expand_path(path)
      dir = File.dirname(path)
      FileUtils.mkdir_p(dir)
      # Dot-prefixed so that directory watchers globbing "*.pb.gz" skip it.
      tmp = File.join(dir, ".#{File.basename(path)}.#{Process.pid}.#{SecureRandom.hex(4)}.tmp")
      begin
        # 0666 & ~umask, like an ordinary File.write (Tempfile would use 0600).
        File.open(tmp, File::WRONLY | File::CREAT | File::EXCL | File::BINARY, 0o666) do |f|
          f.write(data)
          f.flush
          f.fsync
        end
        File.rename(tmp, path)
      rescue Exception # rubocop:disable Lint/RescueException -- also on Interrupt: never leave the temp file behind
        File.unlink(tmp) if File.exist?(tmp)
        raise
      end
      fsync_dir(dir)
      path
    end

    # Makes the rename itself durable. Best effort: not every platform or
    # file system lets a directory be opened and fsynced.
    def fsync_dir(dir)
      File.open(dir, File::RDONLY) { |d| d.fsync }
    rescue SystemCallError, IOError
      nil
    end
  end
end
