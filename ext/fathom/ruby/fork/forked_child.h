// A child forked from a Ruby process to work on a copy-on-write image of
// its heap, and the parent's wait for its one message: what the forked
// retention snapshot (retention/forked_snapshot.cc) and the forked heap
// dump (dump/forked_dump.cc) share. The child's own rules (die with the
// parent, keep no descriptor of the parent's, block every signal, nice 19,
// a bound on its memory, no Ruby code, _exit) and the message format are
// core/io/child_isolation.h and core/io/child_process.h; the reasons are
// in docs/internals/retention.md, "Forked snapshots".
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <vector>

#include "io/child_process.h"

namespace fathom {

struct ForkedChild {
  int64_t fork_ns = 0;  // the app's pause: fork() itself
  retention::ChildReport report;
};

// Call with the GVL, at a safe point. Forks with every signal blocked
// across fork() (so no handler, Ruby's or Fathom's SIGPROF, runs in the
// child before it blocks them for good), with after_fork run in the parent
// right after fork() whatever happened (turn GC back on there). The child
// first asks to be killed when this thread ends (PR_SET_PDEATHSIG: the
// thread, not the process, so this thread waits for the child and reaps
// it before it returns: it outlives the child) and leaves at once if the
// parent is already gone, then closes every descriptor but write_fd and
// keep_fds (a dump's file), stdio pointed at /dev/null, then runs
// child_main(write_fd), which must end with _exit and never return.
// The parent then reads the child's message without the GVL up to
// deadline (MonotonicNs from just before fork), SIGKILLs it past that, and
// always reaps it. An interrupt of the waiting thread stops the wait and
// runs with the GVL (rb_thread_check_ints): if it raises (Thread#kill,
// Thread#raise, Timeout), the child is killed and reaped on the way out;
// if not (Ruby 3.3 called the unblocking function during a 40 s child at
// 5M objects with nothing to raise), the wait resumes. fault_site names the
// FATHOM_FAULT_POINT just after fork, inside the part that reaps the child.
//
// Returns false, with *fork_errno, when pipe2 or fork() failed (nothing
// ran); true otherwise, with out->report saying how the child ended.
bool ForkAndCollect(const char* fault_site, int64_t timeout_ns, const std::vector<int>& keep_fds,
                    const std::function<void(int write_fd)>& child_main, const std::function<void()>& after_fork,
                    ForkedChild* out, int* fork_errno);

}  // namespace fathom
