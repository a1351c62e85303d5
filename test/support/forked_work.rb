# frozen_string_literal: true

require "zlib"

# For the tests of Fathom's forked children (retention snapshots, heap
# dumps): the threads a busy app has at fork time, and the children this
# process has not reaped.
module ForkedWork
  def asan?
    ENV["FATHOM_ASAN"] == "1"
  end

  # This process's children (any thread's), from /proc: a forked child
  # left running or unreaped (a zombie) is listed.
  def children
    Dir["/proc/#{Process.pid}/task/*/children"].flat_map { |f| File.read(f).split }
  rescue Errno::ENOENT
    []
  end

  # 8 threads that, until state[:stop], allocate (and so trigger GC), deflate
  # with zlib (C code without the GVL), sleep (the timer thread), and write
  # and read a pipe (IO, malloc through String growth): at fork time one of
  # them may hold a malloc arena lock, be inside zlib, or wait for the GVL.
  #
  # Under ASan the zlib threads deflate zeros: still C code without the
  # GVL, but no malloc there (the output fits the buffer Ruby's zlib
  # allocated with the GVL; random bytes grow it with realloc without the
  # GVL). GCC 12's ASan runtime (libasan8) takes no lock of its allocator
  # around fork (no fork interceptor, no pthread_atfork: `nm -D` shows
  # neither; LLVM's added one later), so a thread inside ASan's malloc at
  # fork time can leave the child's allocator locked forever: a hang of
  # ASan's, not the app's, whose glibc malloc fork() does lock. The plain
  # build keeps the random bytes, and with them the arena-lock case.
  #
  # While state[:pause] they sleep: see #while_paused. With
  # state[:yield_to_children] each one also sleeps while this process has a
  # child (looked up at most every 10 ms): they are busy at fork time and
  # idle while the child works. A retention snapshot's child runs at nice
  # 19; beside these eight threads and another busy process on a 2-CPU
  # machine it got so little CPU that it ran past the test's 120 s deadline
  # (a fresh clone's CI with a `yes` hog, Ruby 3.1).
  def busy_threads(state)
    8.times.map do |i|
      Thread.new do
        kept = []
        reader, writer = IO.pipe
        data = asan? ? ("\0" * 64 * 1024) : Random.new(i).bytes(64 * 1024)
        next_look = 0.0
        until state[:stop]
          sleep 0.005 while state[:pause] && !state[:stop]
          next_look = sleep_while_a_child_runs(state, next_look) if state[:yield_to_children]
          case i % 4
          when 0 then kept << Array.new(200) { |j| { "k#{j}" => "a#{j}" * 3 } }
          when 1 then Zlib::Deflate.deflate(data)
          when 2 then sleep 0.0005
          when 3
            writer.write("x" * 4096)
            reader.read(4096)
          end
          kept.shift while kept.size > 50
        end
      ensure
        reader&.close
        writer&.close
      end
    end
  end

  # For busy_threads: past next_look (a monotonic time), sleeps while this
  # process has a child; returns when to look next (10 ms on: a look reads
  # /proc).
  def sleep_while_a_child_runs(state, next_look)
    now = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    return next_look if now < next_look

    sleep 0.005 while !state[:stop] && children.any?
    now + 0.01
  end

  # busy_threads for the block's length: yields their state (for
  # #while_paused) and always stops and joins them, also when an assertion
  # or an error ends the block. A failed test used to leave its eight
  # threads burning two CPUs for the rest of the run, slowing every test
  # after it.
  def with_busy_threads(yield_to_children: false)
    state = { stop: false, pause: false, yield_to_children: yield_to_children }
    threads = busy_threads(state)
    yield state
  ensure
    state[:stop] = true
    threads&.each(&:join)
  end

  # The test's own checks, with the busy threads asleep. What these tests
  # are about is the threads' state at fork time; after it they only make
  # the checks slow: reading a gzipped dump back inflates it in small
  # chunks, each giving up the GVL, and on Ruby 3.3 taking it back behind
  # eight busy threads made test/crash/heap_dump_fork_test.rb's four
  # dumps take 18 minutes (~1 s each for the dump itself), and CI's 90
  # minutes ran out.
  def while_paused(state)
    state[:pause] = true
    yield
  ensure
    state[:pause] = false
  end
end
