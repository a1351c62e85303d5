# frozen_string_literal: true

require_relative "atomic_file"
require_relative "stdlib"
require_relative "../notice"
require_relative "../process/held_locks"
require_relative "../monotonic"

module Fathom
  module Files
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
    # The lock is waited for LOCK_TIMEOUT at most (flock(2) has no timeout:
    # LOCK_NB, polled): anyone who can open the file can hold it (another
    # user in a shared directory, another container on the volume, a worker
    # stopped with SIGSTOP mid-write), and a write that waited for them held
    # the app's exit too (40 s for a 40 s hold; forever for one that never
    # ends). Not had in time, the file is written all the same, after
    # removing only what keep_files asks of its own series (no other process
    # writes a series: that part needs no lock), not what keep_bytes asks of
    # the directory (which may then exceed it until a later write gets the
    # lock and removes the oldest files), and Fathom says so once. Until a
    # write gets the lock again the next ones try once without waiting, so
    # several modes flushing at exit wait LOCK_TIMEOUT once in all, not once
    # each.
    #
    # For any writer of a directory (the middleware's request-* files):
    #
    #   rotation = Fathom::Files::Rotation.new(dir, keep_files: 50, keep_bytes: 100 << 20)
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
      # Seconds a write waits for the lock. Another writer holds it for a
      # file's removals and creation: ~0.1 s seen with 40 writers (up to 4 s
      # only when Fathom's forked children inherited it, which they no longer
      # do); the app's shutdown promises 5 s in all (AlwaysOn::Sinks::STOP_TIMEOUT).
      LOCK_TIMEOUT = 2.0
      # The longest pause between two tries (they start at 1 ms, doubling).
      LOCK_POLL_MAX = 0.05

      # removed: files removed to make room; skipped: files written without
      # the directory's lock (not had in time: keep_bytes not applied).
      attr_reader :dir, :keep_files, :keep_bytes, :removed, :skipped

      # writers: accepted for compatibility and ignored (the lock makes room
      # for one file at a time, whoever writes it).
      # lock_timeout: seconds to wait for the directory's lock (LOCK_TIMEOUT).
      def initialize(dir, keep_files:, keep_bytes:, writers: 1, lock_timeout: LOCK_TIMEOUT) # rubocop:disable Lint/UnusedMethodArgument
        @dir = File.expand_path(dir)
        @keep_files = keep_files
        @keep_bytes = keep_bytes
        @lock_timeout = lock_timeout
        @removed = 0
        @skipped = 0
        @contended = false
        @said_skipped = false
        @mutex = Mutex.new
        @pid = Process.pid
      end

      # Makes room for `data` and writes it at `path` (in #dir), under the
      # directory's lock (when the lock is not had in time, see above, only
      # the count of its own series is kept). Returns the absolute path, or nil when
      # something is at `path` already and replace is false (never replaced;
      # nothing written or removed: pick another name). replace: true
      # replaces a file Fathom wrote (AtomicFile.write_new). Raises as
      # AtomicFile.write_new does.
      def write_new(path, data, replace: false)
        locked do |held|
          path = File.expand_path(path)
          next nil if !replace && (File.exist?(path) || File.symlink?(path))

          make_room(data.bytesize, path, own_series_only: !held)
          AtomicFile.write_new(path, data, replace: replace)
        end
      end

      # Runs the block holding the directory's lock (threads of this process
      # and other processes), waiting for it lock_timeout at most. Yields
      # whether the lock is held: false when another process kept it past
      # the timeout (the block runs all the same; it must not rotate then).
      def locked
        after_fork_reset
        @mutex.synchronize do
          Stdlib.mkdir_p(@dir)
          File.open(File.join(@dir, LOCK_NAME), File::RDWR | File::CREAT | File::NOFOLLOW, 0o600) do |lock|
            HeldLocks.hold(lock)
            begin
              yield take_lock(lock)
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
      # #write_new holds it. own_series_only: the count of the new file's own
      # series and nothing else (nothing at all without a series), which
      # needs no lock: only this process writes its series (pid and token),
      # and its writes take turns on @mutex; what another process removes
      # from it meanwhile (by bytes) only leaves more room.
      def make_room(incoming, path = nil, own_series_only: false)
        files = ours
        series = path && self.class.series(path)
        return [] if own_series_only && series.nil?

        mine = series ? files.select { |p, _, _| self.class.series(p) == series } : files
        gone = []
        # Count first, in the new file's series only (oldest first)...
        mine.first([mine.size + 1 - @keep_files, 0].max).each { |p, _, _| gone << p if unlink(p) }
        @removed += gone.size
        return gone if own_series_only

        # ...then bytes, over the whole directory (oldest first, any series).
        left = files.reject { |p, _, _| gone.include?(p) }
        total = left.sum { |_, size, _| size }
        left.each do |p, size, _|
          break if total + incoming <= @keep_bytes

          if unlink(p)
            gone << p
            @removed += 1
          end
          total -= size
        end
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

      # flock(LOCK_EX) polled with LOCK_NB until lock_timeout (no wait at all
      # while the last write did not get it either). true when held.
      def take_lock(lock)
        deadline = Monotonic.now + (@contended ? 0 : @lock_timeout)
        pause = 0.001
        loop do
          if lock.flock(File::LOCK_EX | File::LOCK_NB)
            @contended = false
            return true
          end
          left = deadline - Monotonic.now
          break if left <= 0

          sleep([pause, left].min)
          pause = [pause * 2, LOCK_POLL_MAX].min
        end
        lock_not_had
        false
      end

      def lock_not_had
        @contended = true
        @skipped += 1
        return if @said_skipped

        @said_skipped = true
        Fathom.notice do
          "fathom: #{File.join(@dir, LOCK_NAME)} is held by another process (not had in #{@lock_timeout}s): " \
            "profiles are written without the directory's byte bound (keep_bytes, FATHOM_KEEP_MB) until it is " \
            "free; each process's own count (FATHOM_KEEP) still holds (said once)"
        end
      end

      # true when removed (by us): false when another process removed it first.
      def unlink(path)
        File.unlink(path)
        true
      rescue Errno::ENOENT
        false
      end

      # A Mutex held by a thread that did not survive fork stays locked. A
      # new process says again what it has to say.
      def after_fork_reset
        return if @pid == Process.pid

        @pid = Process.pid
        @mutex = Mutex.new
        @contended = false
        @said_skipped = false
      end
    end
  end
end
