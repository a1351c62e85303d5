#include "io/child_deadline.h"

#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include <cstdio>
#include <cstring>

namespace fathom {
namespace retention {

bool ChildDeadline::Expired(int64_t now_ns, int64_t child_cpu_ns, bool runnable) {
  int64_t wall = now_ns - start_ns_;
  if (wall >= timeout_ns_ * kWallCapFactor) return true;
  if (child_cpu_ns < 0) return wall >= timeout_ns_;
  if (child_cpu_ns >= timeout_ns_) return true;
  // The first reading is the baseline (what fork left on the clock), not a
  // move.
  if ((last_cpu_ns_ >= 0 && child_cpu_ns != last_cpu_ns_) || runnable) last_move_ns_ = now_ns;
  last_cpu_ns_ = child_cpu_ns;
  int64_t still_for = timeout_ns_ < kStalledNs ? timeout_ns_ : kStalledNs;
  return wall >= timeout_ns_ && now_ns - last_move_ns_ >= still_for;
}

int64_t ChildDeadline::WallLeftMs(int64_t now_ns) const {
  int64_t left = start_ns_ + timeout_ns_ - now_ns;
  return left > 0 ? left / 1000000 : 0;
}

int64_t ChildCpuNs(pid_t pid) {
  clockid_t clock;
  if (clock_getcpuclockid(pid, &clock) != 0) return -1;
  struct timespec ts;
  if (clock_gettime(clock, &ts) != 0) return -1;
  return static_cast<int64_t>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

bool ChildRunnable(pid_t pid) {
  char path[64];
  snprintf(path, sizeof path, "/proc/%d/stat", static_cast<int>(pid));
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  char buf[512];
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return false;
  buf[n] = '\0';
  // "pid (comm) S ...": the state follows the last ')' (comm may hold one).
  const char* close_paren = strrchr(buf, ')');
  return close_paren != nullptr && close_paren[1] == ' ' && close_paren[2] == 'R';
}

}  // namespace retention
}  // namespace fathom
