# frozen_string_literal: true

require_relative "../files/atomic_file"
require_relative "../files/stdlib"
require_relative "../process/held_locks"

module Fathom
  # Keeps a directory of profiles bounded, the oldest removed first, at
  # every moment (never one file too many, not even for an instant, not
  # even with several processes writing there):
  #
  #   keep_files  at most this many files per series: one process image
  #               (pid and token) and one mode ("heap-4242-1a2b3c4d-…",
  #               "request-cpu-4242-1a2b3c4d-…"). FATHOM_KEEP=50 so keeps 50
  #               files of each worker's CPU, 50 of its heap..., however
  #               many workers share the directory. It used to count the
  #               whole directory: 8 puma workers x 2 modes at 60 s kept
  #               about 3 minutes of history, and each extra worker shortened
  #               everybody's.
  #   keep_bytes  at most this many bytes in the whole directory, every
  #               series together: the disk bound. It is also what removes
  #               the files of processes that have exited (restarted
  #               workers, earlier deploys): they are the oldest, so they go
  #               first once the directory is full. A process cannot tell
  #               whether another one is alive (containers sharing a volume
  #               are in other pid namespaces), so nothing else does. Only files Fathom created are counted or removed: names
  # of Fathom's patterns (NAME: <mode>-<pid>[-<token>]-<time>-<index> for
  # always-on, request-<kind>-<pid>[-<token>]-<time>-<index> for the Rack
  # middleware, .pb.gz / .json.gz) whose content Fathom wrote
  # (AtomicFile.written_by_fathom?); anything else in the directory is left
  # alone, and temporary files (".….fathom-tmp", hidden) are not profiles.
  #
  # How the bound holds: every writer creates its file through #write_new,
  # which takes an flock(2) on "<dir>/.fathom.lock" (created 0600), removes
  # the oldest files until the new one fits (count + 1 <= keep_files,
  # bytes + its size <= keep_bytes), creates the file, and only then lets
  # the next writer (a thread, another flusher, another process sharing the
  # directory: puma workers, containers on one volume) in. The lock file is
  # opened for each write, never kept open: a descriptor inherited across
  # fork would share the lock with the parent. A process forked while the
  # lock is held closes its copy at once (HeldLocks), and Fathom's own
  # forked children close every descriptor.
  #
  # For any writer of a directory (the middleware's request-* files):
  #
  #   rotation = Fathom::Rotation.new(dir, keep_files: 50, keep_bytes: 100 << 20)
  #   rotation.write_new(File.join(dir, name), profile.bytes)  # path, or nil if the name exists
  #
  # A file bigger than keep_bytes alone is still written (after removing
  # every other file): the newest profile is never dropped.
  class Rotation
    NAME = /\A(?:(?:heap|gc|retention|cpu|wall)|request-[a-z]+)-\d+-(?:\h{8}-)?\d{8}T\d{6}Z-\d+\.(?:pb|json)\.gz\z/.freeze
    # The series of a NAME: everything before the time (kind, pid, token).
    SERIES = /\A(.*?-\d+-(?:\h{8}-)?)\d{8}T\d{6}Z-/.freeze
    LOCK_NAME = ".fathom.lock"
    FILES_RANGE = (1..1_000_000).freeze
    MB_RANGE = (1..1_000_000).freeze

    attr_reader :dir, :keep_files, :keep_bytes, :removed

    # writers: accepted for compatibility and ignored (the lock makes room
    # for one file at a time, whoever writes it).
    def initialize(dir, keep_files:, keep_bytes:, writers: 1) # rubocop:disable Lint/UnusedMethodArgument
      @dir = File.expand_path(dir)
      @keep_files = keep_files
      @keep_bytes = keep_bytes
      @removed = 0
      @mutex = Mutex.new
      @pid = Process.pid
    end

    # Makes room for `data` and writes it at `path` (in #dir), under the
    # directory's lock. Returns the absolute path, or nil when something is
    # at `path` already (never replaced; nothing written or removed:
    # pick another name). Raises as AtomicFile.write_new does.
    def write_new(path, data)
      locked do
        path = File.expand_path(path)
        next nil if File.exist?(path) || File.symlink?(path)

        make_room(data.bytesize, path)
        AtomicFile.write_new(path, data, replace: false)
      end
    end

    # Holds the directory's lock (threads of this process and other
    # processes) while the block runs.
    def locked
      after_fork_reset
      @mutex.synchronize do
        Stdlib.mkdir_p(@dir)
        File.open(File.join(@dir, LOCK_NAME), File::RDWR | File::CREAT | File::NOFOLLOW, 0o600) do |lock|
          HeldLocks.hold(lock)
          begin
            lock.flock(File::LOCK_EX)
            yield
          ensure
            HeldLocks.release(lock)
          end
        end
      end
    end

    # The series of a file name (Rotation::SERIES), or nil when the name
    # is not one of Fathom's.
    def self.series(name)
      name = File.basename(name)
      NAME.match?(name) ? name[SERIES, 1] : nil
    end

    # Removes the oldest files until one more of `incoming` bytes, to be
    # written at `path`, fits: its series below keep_files, the directory
    # below keep_bytes. Without a path (or with a name that is not
    # Fathom's) every file counts as one series. Returns the paths removed.
    # Without the lock (#locked) another writer may add a file meanwhile:
    # #write_new holds it.
    def make_room(incoming, path = nil)
      files = ours
      series = path && self.class.series(path)
      mine = series ? files.select { |p, _, _| self.class.series(p) == series } : files
      gone = []
      # Count first, in the new file's series only (oldest first)...
      mine.first([mine.size + 1 - @keep_files, 0].max).each { |p, _, _| gone << p if unlink(p) }
      # ...then bytes, over the whole directory (oldest first, any series).
      left = files.reject { |p, _, _| gone.include?(p) }
      total = left.sum { |_, size, _| size }
      left.each do |p, size, _|
        break if total + incoming <= @keep_bytes

        gone << p if unlink(p)
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

    private

    # true when removed (by us): false when another process removed it first.
    def unlink(path)
      File.unlink(path)
      true
    rescue Errno::ENOENT
      false
    end

    # A Mutex held by a thread that did not survive fork stays locked.
    def after_fork_reset
      return if @pid == Process.pid

      @pid = Process.pid
      @mutex = Mutex.new
    end
  end
end
