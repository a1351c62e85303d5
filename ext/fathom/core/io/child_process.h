// A forked child that computes something from a copy-on-write image of the
// process and sends the result back through a pipe: the supervision half
// that needs no Ruby (docs/internals/retention.md, "Forked snapshots").
//
// The binding forks (holding the GVL, at a safe point) and runs the child's
// work; this file gives it what surrounds the work:
//   - in the child: BlockAllSignals (no signal handler of the parent's, Ruby's
//     or Fathom's own, ever runs there; SIGKILL still ends it),
//     LimitAddressSpace (a bound on what the child may map beyond what it
//     inherited), SendResult / SendFailure (one message, then _exit);
//   - in the parent: CollectChild reads the message up to a deadline or a
//     cancel request, kills the child (SIGKILL) past either, and always reaps
//     it: no zombie is left, whatever happened.
// The message is one byte, 'K' (a result follows) or 'E' (an error text
// follows), then the bytes up to end of file. Nothing here allocates in the
// child but what the caller's strings already hold.
#pragma once

#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <string>

namespace fathom {
namespace retention {

// ---- child side (after fork, before _exit)

// Blocks every signal that can be blocked in the calling thread (the
// child's only one). Synchronous faults (SIGSEGV...) still end the child.
void BlockAllSignals();

// nice 19: the child takes CPU time the app leaves idle, not the app's
// own. A child inherits the parent's CPU affinity, so in a process pinned
// to one CPU (taskset, a container's cpuset) it would otherwise take half
// of that CPU from the request threads for as long as it walks. At nice
// 19 it gets ~1.5% of a CPU the app keeps busy (the CFS weights of nice 0
// and 19 are 1024 and 15): a slower snapshot, bounded by its deadline,
// and requests that do not notice it. Not SCHED_IDLE: on a CPU the app
// saturates, that child would never run before its deadline. Returns
// false when the priority could not be changed (the child runs anyway).
bool LowerPriority();

// setrlimit(RLIMIT_AS) to the child's current mapped size (from
// /proc/self/statm) plus extra_bytes: allocations past it fail (bad_alloc,
// or a failed mmap) instead of the machine swapping. Returns false when the
// limit could not be set (the child then runs unbounded, the deadline still
// holds). extra_bytes == 0: no limit.
bool LimitAddressSpace(uint64_t extra_bytes);

// Writes 'K' then the bytes, or 'E' then the text, to fd. False when the
// pipe failed (the parent is gone or killed us).
bool SendResult(int fd, const std::string& bytes);
bool SendFailure(int fd, const char* text);

// ---- parent side

struct ChildReport {
  enum Outcome { kOk, kFailed, kTimedOut, kCancelled };
  Outcome outcome = kFailed;
  std::string bytes;  // the result (kOk)
  std::string error;  // what went wrong otherwise, for an exception message
  int wait_status = 0;
  bool reaped = false;  // waitpid saw the child end (else someone else reaped it)
  int64_t wait_ns = 0;  // from the call to the child's end
};

// Reads the child's message from read_fd (and closes it), appending to
// report->bytes, until the child's deadline (io/child_deadline.h: timeout_ns
// of its CPU time, or of wall time from started_ns, MonotonicNs just before
// fork, once its CPU clock stops moving; 10x timeout_ns of wall time at
// most). Past the deadline the child is sent SIGKILL. Always waits for the child (EINTR
// retried), so no zombie is left, except when *cancel turns true (checked
// every 50 ms and whenever data arrives): then it returns kCancelled at
// once with the child running and read_fd open, for the caller to run the
// interrupt that cancelled it (Ruby's unblocking function is also called
// for interrupts that raise nothing) and call it again with the same
// report, or KillAndReap. Call it without the GVL: it blocks.
void CollectChild(pid_t pid, int read_fd, int64_t started_ns, int64_t timeout_ns, const std::atomic<bool>* cancel,
                  ChildReport* report);

// SIGKILL, close read_fd, wait (EINTR retried): for a child given up on.
void KillAndReap(pid_t pid, int read_fd);

}  // namespace retention
}  // namespace fathom
