# frozen_string_literal: true

# Looking at a forked child from outside (through /proc), for the tests of
# what Fathom's forked children hold and how long they live (issue 40,
# items 5-7): its descriptors, whether it is gone, and a way to hold it
# still mid-work so that what the tests check cannot race with its end.
module ChildWatch
  # How many descriptors a snapshot's child keeps: 0-2 (/dev/null) and its
  # result pipe; a dump's child keeps its file too.
  SNAPSHOT_FDS = 4
  DUMP_FDS = 5

  module_function

  def monotonic
    Process.clock_gettime(Process::CLOCK_MONOTONIC)
  end

  # The pids of `pid`'s children (any of its threads').
  def children(pid = Process.pid)
    Dir["/proc/#{pid}/task/*/children"].flat_map { |f| File.read(f).split.map(&:to_i) }
  rescue SystemCallError
    []
  end

  # {fd => what it points at} of a live process; {} once it is gone.
  def descriptors(pid)
    Dir.children("/proc/#{pid}/fd").to_h do |fd|
      [fd.to_i, File.readlink("/proc/#{pid}/fd/#{fd}")]
    rescue SystemCallError
      [fd.to_i, nil]
    end
  rescue SystemCallError
    {}
  end

  # Its state letter from /proc/<pid>/stat ("R", "S", "T", "Z"...), nil
  # when there is no such process.
  def state(pid)
    File.read("/proc/#{pid}/stat")[/\) (\S)/, 1]
  rescue SystemCallError
    nil
  end

  # Gone: no such process, or a zombie (it has ended; reaping it is
  # its new parent's business, and some containers' pid 1 never does).
  def gone?(pid)
    s = state(pid)
    s.nil? || s == "Z" || s == "X"
  end

  PF_EXITING = 0x4 # include/linux/sched.h: the task is in do_exit()
  SIGKILL_BIT = 8 # signal 9 in a /proc/<pid>/status signal mask

  # Killed: gone, or SIGKILL queued (SigPnd/ShdPnd) or being carried out
  # (PF_EXITING): it runs no code of its own again (SIGKILL is acted on
  # before any return to user space). Tearing down a big address space
  # after that takes a dying process at nice 19 on a busy machine seconds
  # (2.2 s seen at a load of 22 on 2 CPUs); gone? waits for the end of it.
  def killed?(pid)
    return true if gone?(pid)

    flags = File.read("/proc/#{pid}/stat")[/\) (.*)/, 1].split[6].to_i
    return true if flags & PF_EXITING != 0

    status = File.read("/proc/#{pid}/status")
    %w[SigPnd ShdPnd].any? { |mask| status[/^#{mask}:\s*(\h+)/, 1].to_i(16)[SIGKILL_BIT] == 1 }
  rescue SystemCallError
    true
  end

  # Seconds until the block is true, polling every millisecond; nil past `bound`.
  def time_until(bound)
    started = monotonic
    until yield
      return nil if monotonic - started > bound

      sleep 0.001
    end
    monotonic - started
  end

  # The first child of `parent` that appears while `alive` (a block) says
  # the work that forks it goes on; nil if the work ended first (a child
  # too quick to be seen).
  def await_child(parent = Process.pid, seconds: 120)
    deadline = monotonic + seconds
    loop do
      child = children(parent).first
      return child if child
      return nil unless yield
      raise "no child in #{seconds} s" if monotonic > deadline

      sleep 0.001
    end
  end

  # Waits until `child` holds at most `count` descriptors (it has done what
  # it does first: Fathom's children close what they inherited at once)
  # or `seconds` passed (count nil: not at all), then stops it (SIGSTOP: it can neither go on nor
  # end while the test looks at what it holds) and waits until it has
  # stopped (a signal is delivered when the child next runs: at nice 19 on
  # a busy machine, that can take a while). Returns what it holds, or nil
  # when it ended first.
  def stop_when_settled(child, count, seconds: 2)
    deadline = monotonic + seconds
    sleep 0.001 while count && descriptors(child).size > count && monotonic < deadline
    Process.kill(:STOP, child)
    sleep 0.001 until stopped?(child) || gone?(child)
    stopped?(child) ? descriptors(child) : nil
  rescue Errno::ESRCH
    nil
  end

  def stopped?(pid)
    %w[T t].include?(state(pid))
  end
end
