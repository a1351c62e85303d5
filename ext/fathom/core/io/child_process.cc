#include "io/child_process.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "base/clock.h"
#include "io/child_deadline.h"

namespace fathom {
namespace retention {
namespace {

constexpr int kPollSliceMs = 50;  // how often a cancel request is noticed

bool WriteAll(int fd, const char* data, size_t n) {
  while (n > 0) {
    ssize_t w = write(fd, data, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    data += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

// The child's mapped size in bytes (statm's first field, in pages), 0 if unknown.
uint64_t MappedBytes() {
  int fd = open("/proc/self/statm", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return 0;
  char buf[128];
  ssize_t n = read(fd, buf, sizeof buf - 1);
  close(fd);
  if (n <= 0) return 0;
  buf[n] = 0;
  unsigned long long pages = 0;
  if (sscanf(buf, "%llu", &pages) != 1) return 0;
  return pages * static_cast<uint64_t>(sysconf(_SC_PAGESIZE));
}

// waitpid, retried on EINTR. False when the child is not ours to wait for
// any more (ECHILD: someone else's Process.wait(-1) reaped it).
bool Reap(pid_t pid, int* status, int flags, bool* ended) {
  for (;;) {
    pid_t r = waitpid(pid, status, flags);
    if (r == pid) {
      *ended = true;
      return true;
    }
    if (r == 0) return true;  // WNOHANG: still running
    if (errno == EINTR) continue;
    *ended = true;  // ECHILD: gone, reaped elsewhere
    return false;
  }
}

std::string DescribeStatus(int status) {
  char text[96];
  if (WIFEXITED(status))
    snprintf(text, sizeof text, "exited with status %d", WEXITSTATUS(status));
  else if (WIFSIGNALED(status))
    snprintf(text, sizeof text, "ended by signal %d (%s)", WTERMSIG(status), strsignal(WTERMSIG(status)));
  else
    snprintf(text, sizeof text, "ended (wait status %d)", status);
  return text;
}

}  // namespace

void BlockAllSignals() {
  sigset_t all;
  sigfillset(&all);
  pthread_sigmask(SIG_BLOCK, &all, nullptr);
}

bool LowerPriority() { return setpriority(PRIO_PROCESS, 0, 19) == 0; }

bool LimitAddressSpace(uint64_t extra_bytes) {
  if (extra_bytes == 0) return true;
  uint64_t now = MappedBytes();
  if (now == 0) return false;
  struct rlimit limit;
  if (getrlimit(RLIMIT_AS, &limit) != 0) return false;
  rlim_t want = static_cast<rlim_t>(now + extra_bytes);
  if (limit.rlim_max != RLIM_INFINITY && want > limit.rlim_max) want = limit.rlim_max;
  limit.rlim_cur = want;
  return setrlimit(RLIMIT_AS, &limit) == 0;
}

bool SendResult(int fd, const std::string& bytes) {
  return WriteAll(fd, "K", 1) && WriteAll(fd, bytes.data(), bytes.size());
}

bool SendFailure(int fd, const char* text) { return WriteAll(fd, "E", 1) && WriteAll(fd, text, strlen(text)); }

void KillAndReap(pid_t pid, int read_fd) {
  kill(pid, SIGKILL);
  close(read_fd);
  int status;
  bool ended = false;
  Reap(pid, &status, 0, &ended);
}

void CollectChild(pid_t pid, int read_fd, int64_t started_ns, int64_t timeout_ns, const std::atomic<bool>* cancel,
                  ChildReport* out) {
  ChildReport& report = *out;
  int64_t started = MonotonicNs();
  ChildDeadline deadline(started_ns, timeout_ns);
  auto expired = [&] { return deadline.Expired(MonotonicNs(), ChildCpuNs(pid), ChildRunnable(pid)); };
  std::string& got = report.bytes;
  bool eof = false;
  report.outcome = ChildReport::kFailed;
  char buf[1 << 16];
  // Read until end of file (the child exited or closed the pipe), the
  // deadline, or a cancel request.
  while (!eof) {
    if (cancel != nullptr && cancel->load(std::memory_order_relaxed)) {
      report.outcome = ChildReport::kCancelled;
      break;
    }
    if (expired()) {
      report.outcome = ChildReport::kTimedOut;
      break;
    }
    int64_t left_ms = deadline.WallLeftMs(MonotonicNs());
    struct pollfd p = {read_fd, POLLIN, 0};
    int r = poll(&p, 1, static_cast<int>(left_ms > 0 && left_ms < kPollSliceMs ? left_ms : kPollSliceMs));
    if (r < 0 && errno != EINTR) break;
    if (r <= 0) continue;
    ssize_t n = read(read_fd, buf, sizeof buf);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) continue;
    if (n <= 0) {
      eof = true;
      break;
    }
    got.append(buf, static_cast<size_t>(n));
  }
  if (report.outcome == ChildReport::kCancelled) {
    report.wait_ns += MonotonicNs() - started;
    return;  // the caller decides: wait again, or KillAndReap
  }
  close(read_fd);
  bool ended = false;
  if (!eof) {
    // Past the deadline, cancelled, or the pipe failed: the child goes now.
    kill(pid, SIGKILL);
    report.reaped = Reap(pid, &report.wait_status, 0, &ended);
  } else {
    // End of file: the child is exiting. It closes the pipe only by ending,
    // but give a stuck exit the same deadline before killing it.
    while (!ended) {
      report.reaped = Reap(pid, &report.wait_status, WNOHANG, &ended);
      if (ended) break;
      if (expired() || (cancel != nullptr && cancel->load(std::memory_order_relaxed))) {
        kill(pid, SIGKILL);
        report.reaped = Reap(pid, &report.wait_status, 0, &ended);
        break;
      }
      usleep(1000);
    }
  }
  report.wait_ns += MonotonicNs() - started;
  if (!eof) {
    if (report.outcome == ChildReport::kFailed) report.error = "reading from the child failed";
    else report.error = "the child ran past its deadline and was killed (it used its whole timeout in CPU, or stopped working past it)";
    got.clear();
    return;
  }
  bool clean_exit = !report.reaped || (WIFEXITED(report.wait_status) && WEXITSTATUS(report.wait_status) == 0);
  if (!got.empty() && got[0] == 'K' && clean_exit) {
    report.outcome = ChildReport::kOk;
    got.erase(0, 1);
    return;
  }
  report.outcome = ChildReport::kFailed;
  if (!got.empty() && got[0] == 'E')
    report.error = got.substr(1);
  else
    report.error = "the child " + (report.reaped ? DescribeStatus(report.wait_status) : std::string("was reaped elsewhere")) +
                   " without a result";
  got.clear();
}

}  // namespace retention
}  // namespace fathom
