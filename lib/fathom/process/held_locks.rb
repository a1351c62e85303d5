# frozen_string_literal: true

require_relative "fork_hooks"

module Fathom
  # The files whose flock(2) this process holds right now: the always-on
  # directory's .fathom.lock while a file is written (Rotation), and each
  # temporary file while it is written (Files::AtomicFile, Profilers::HeapDump: the lock says
  # "its writer is alive" to whoever cleans up stale temporary files).
  #
  # An flock belongs to the open file, and fork() gives the child the same
  # open file: a process forked while a thread held the lock (a puma worker
  # booting, a job runner, Process.fork from the app) held it too, for as
  # long as it kept the descriptor. The thread that would close it was not
  # copied, so the child kept it for its whole life, and every other writer
  # of the directory waited for the child. In the child, ForkHooks closes
  # each of them (close only: flock(LOCK_UN) would release the parent's
  # lock too, since both share it). Fathom's own forked children (snapshot,
  # dump) close every descriptor instead (core/io/child_isolation.h).
  module HeldLocks
    @files = {}.compare_by_identity
    @lock = Mutex.new

    class << self
      # Registers `file` (an open File whose lock the caller holds or is
      # about to take) until #release.
      def hold(file)
        ForkHooks.register(self)
        @lock.synchronize { @files[file] = true }
        file
      end

      def release(file)
        @lock.synchronize { @files.delete(file) }
        nil
      end

      # The files held now (for tests).
      def files
        @lock.synchronize { @files.keys }
      end

      # ForkHooks, in the child: only the forking thread was copied, so none
      # of these is in use here.
      def after_fork_child
        @lock = Mutex.new
        files = @files.keys
        @files = {}.compare_by_identity
        files.each do |file|
          file.close unless file.closed?
        rescue IOError, SystemCallError
          nil
        end
      end
    end
  end
end
