# frozen_string_literal: true

# How long the thread that made it was kept off the CPU while it wanted to
# run, read from the kernel without creating a Ruby object, so that reading
# it right around a GC.start cannot itself start a GC:
#   run_delay_ns  /proc/thread-self/schedstat's second field: time spent
#                 runnable on a run queue, not running (Linux with
#                 CONFIG_SCHED_INFO, which Debian's kernels have)
#   steal_ns      /proc/stat's "steal" over all CPUs: time the hypervisor
#                 gave this VM's CPUs to someone else (a thread's share is
#                 at most that), in USER_HZ ticks of 10 ms; 0 on bare metal
# Wall time exceeds a thread's CPU time by these two (and by time it slept
# or blocked, which a GC does not). Both return nil where the file is
# missing or unreadable.
class OffCpuClock
  USER_HZ_NS = 10_000_000

  def initialize
    @schedstat = open_proc("/proc/thread-self/schedstat")
    @stat = open_proc("/proc/stat")
    # Big enough that sysread never grows it (growing would malloc, and
    # Ruby counts malloc towards its next GC).
    @buf = String.new(capacity: 8192)
  end

  def run_delay_ns
    read(@schedstat) && field(1, skip_words: 0)
  end

  def steal_ns
    (read(@stat) && field(7, skip_words: 1))&.*(USER_HZ_NS)
  end

  private

  def open_proc(path)
    File.open(path)
  rescue SystemCallError
    nil
  end

  def read(file)
    return nil unless file

    file.sysseek(0)
    file.sysread(8192, @buf)
    true
  rescue SystemCallError, EOFError
    nil
  end

  # The index-th number (0-based) on the buffer's first line, after
  # skip_words words ("cpu" in /proc/stat). A while loop over bytes:
  # Integers below 2**62 are immediates, and a `break` or `return` out of a
  # block would allocate (Ruby's throw object), so nothing here does.
  def field(index, skip_words:)
    seen = -1 - skip_words
    value = 0
    in_token = false
    i = 0
    size = @buf.bytesize
    while i < size
      b = @buf.getbyte(i)
      i += 1
      break if b == 10 # end of the first line

      if b == 32
        in_token = false
      elsif !in_token
        in_token = true
        seen += 1
        break if seen > index

        value = b - 48
      elsif seen == index
        value = (value * 10) + (b - 48)
      end
    end
    seen >= index ? value : nil
  end
end
