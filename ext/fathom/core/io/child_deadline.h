// When a forked child (retention snapshot, heap dump) is given up on.
//
// A deadline in wall time alone turned healthy children into errors on a
// busy machine: the child runs at nice 19, and beside CPU-bound processes
// it gets ~1.5% of a CPU, so a walk that needs 3 s of CPU takes minutes (a
// CI run beside other work: "the forked snapshot child ran past its
// deadline and was killed", and the endpoint answered 500). What the
// deadline is for is a child that runs away or is stuck, and the child's
// own CPU clock tells those apart from a slow one:
//   - past `timeout` of the child's CPU time: it runs away;
//   - past `timeout` of wall time while its CPU clock has not moved for
//     kStalledNs (or `timeout`, if shorter) and it has not been runnable
//     meanwhile: it is stuck (a lock inherited across fork, a page it
//     cannot get). A child that is runnable but gets no CPU (state R in
//     /proc: at nice 19 beside busier processes it can wait seconds for
//     a turn) is slow, not stuck: measured in a CI run beside a build, a
//     snapshot child under ASan was killed 600 s in, still working;
//   - past kWallCapFactor x `timeout` of wall time in any case: a bound on
//     how long the caller waits, whatever the machine.
// Readings come from the caller (pure logic, unit-tested with made-up
// clocks); ChildCpuNs reads a child's CPU clock.
#pragma once

#include <sys/types.h>

#include <cstdint>

namespace fathom {
namespace retention {

class ChildDeadline {
 public:
  static constexpr int64_t kStalledNs = 2000000000;  // no CPU for 2 s: not working
  static constexpr int kWallCapFactor = 10;

  // start_ns: MonotonicNs just before fork; timeout_ns > 0.
  ChildDeadline(int64_t start_ns, int64_t timeout_ns)
      : start_ns_(start_ns), timeout_ns_(timeout_ns), last_move_ns_(start_ns) {}

  // One look: the wall clock now, the child's CPU clock (-1: unreadable,
  // then wall time alone decides, as before) and whether it is runnable
  // now (ChildRunnable). True when the child is to be given up on.
  bool Expired(int64_t now_ns, int64_t child_cpu_ns, bool runnable = false);

  // Milliseconds until the wall time alone could expire it: a bound for a
  // wait (poll) between looks. Never below 0.
  int64_t WallLeftMs(int64_t now_ns) const;

 private:
  int64_t start_ns_;
  int64_t timeout_ns_;
  int64_t last_cpu_ns_ = -1;
  int64_t last_move_ns_;
};

// The CPU time a child process has used so far (clock_getcpuclockid), or
// -1 when it cannot be read (the child is gone, or not ours).
int64_t ChildCpuNs(pid_t pid);

// Whether a child is runnable (running or waiting for a CPU: state R in
// /proc/<pid>/stat); false when it sleeps, waits on disk, is gone or
// cannot be read.
bool ChildRunnable(pid_t pid);

}  // namespace retention
}  // namespace fathom
