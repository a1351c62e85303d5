# frozen_string_literal: true

module Fathom
  # A random token naming this process image in Fathom's file names
  # (%{token}): the pid alone does not tell processes apart when two
  # containers (each with its own pid 1) share a volume, or when a process
  # execs itself (same pid: puma's USR2 restart), and their files then
  # collided and replaced each other. 8 hex digits from Random.urandom
  # (core Ruby, no securerandom: see files/stdlib.rb); new in each process image
  # (this file is loaded again after exec) and in each forked child (the
  # pid changed since it was made).
  module ProcessToken
    @token = nil
    @pid = nil
    # Two flushers (heap and gc) asking at once for the first time both
    # made a token: one process's files carried two, and per-process
    # rotation (Rotation, FATHOM_KEEP) saw two processes. The lock makes
    # the first one win. (A Mutex held by a thread that does not survive
    # fork is released in the child by Ruby; the pid check then makes the
    # child's own token.)
    @lock = Mutex.new

    module_function

    def get
      pid = Process.pid
      return @token if @pid == pid # @token is set before @pid

      @lock.synchronize do
        unless @pid == pid
          @token = Random.urandom(4).unpack1("H*")
          @pid = pid
        end
        @token
      end
    end
  end
end
