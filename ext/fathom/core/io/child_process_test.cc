#include "io/child_process.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <string>

#include "base/clock.h"

namespace fathom {
namespace retention {
namespace {

constexpr int64_t kSecond = 1000000000;

// Forks a child running body(write_fd) then _exit(code); returns the pid
// and the read end in *fd.
template <typename F>
pid_t Spawn(int* fd, F body, int code = 0) {
  int p[2];
  EXPECT_EQ(0, pipe(p));
  pid_t pid = fork();
  if (pid == 0) {
    close(p[0]);
    BlockAllSignals();
    body(p[1]);
    _exit(code);
  }
  close(p[1]);
  *fd = p[0];
  return pid;
}

// The child is gone: no zombie of it is left to reap.
void ExpectNoChild(pid_t pid) {
  errno = 0;
  EXPECT_EQ(-1, waitpid(pid, nullptr, WNOHANG));
  EXPECT_EQ(ECHILD, errno);
}

TEST(ChildProcess, ResultComesBackWhole) {
  int fd;
  std::string big(300000, 'x');  // more than a pipe's buffer: the parent must read while the child writes
  big[12345] = 'y';
  pid_t pid = Spawn(&fd, [&](int w) { SendResult(w, big); });
  ChildReport r;
  CollectChild(pid, fd, MonotonicNs(), 30 * kSecond, nullptr, &r);
  EXPECT_EQ(ChildReport::kOk, r.outcome) << r.error;
  EXPECT_EQ(big, r.bytes);
  EXPECT_TRUE(r.reaped);
  ExpectNoChild(pid);
}

TEST(ChildProcess, FailureTextIsReported) {
  int fd;
  pid_t pid = Spawn(&fd, [](int w) { SendFailure(w, "out of memory"); }, 1);
  ChildReport r;
  CollectChild(pid, fd, MonotonicNs(), 30 * kSecond, nullptr, &r);
  EXPECT_EQ(ChildReport::kFailed, r.outcome);
  EXPECT_EQ("out of memory", r.error);
  ExpectNoChild(pid);
}

TEST(ChildProcess, ACrashedChildIsAFailure) {
  int fd;
  pid_t pid = Spawn(&fd, [](int) { kill(getpid(), SIGKILL); });
  ChildReport r;
  CollectChild(pid, fd, MonotonicNs(), 30 * kSecond, nullptr, &r);
  EXPECT_EQ(ChildReport::kFailed, r.outcome);
  EXPECT_NE(std::string::npos, r.error.find("signal 9")) << r.error;
  ExpectNoChild(pid);
}

TEST(ChildProcess, AResultWithoutACleanExitIsAFailure) {
  int fd;
  pid_t pid = Spawn(&fd, [](int w) { SendResult(w, "partial"); }, 3);
  ChildReport r;
  CollectChild(pid, fd, MonotonicNs(), 30 * kSecond, nullptr, &r);
  EXPECT_EQ(ChildReport::kFailed, r.outcome);
  ExpectNoChild(pid);
}

TEST(ChildProcess, PastTheDeadlineTheChildIsKilledAndReaped) {
  int fd;
  // Blocked signals: only SIGKILL can end it (SIGTERM would not).
  pid_t pid = Spawn(&fd, [](int) {
    for (;;) pause();
  });
  ChildReport r;
  CollectChild(pid, fd, MonotonicNs(), kSecond / 5, nullptr, &r);
  EXPECT_EQ(ChildReport::kTimedOut, r.outcome);
  EXPECT_TRUE(r.reaped);
  EXPECT_TRUE(WIFSIGNALED(r.wait_status));
  EXPECT_EQ(SIGKILL, WTERMSIG(r.wait_status));
  ExpectNoChild(pid);
}

TEST(ChildProcess, ACancelLeavesTheChildToTheCaller) {
  int fd;
  pid_t pid = Spawn(&fd, [](int) {
    for (;;) pause();
  });
  std::atomic<bool> cancel{true};
  ChildReport r;
  CollectChild(pid, fd, MonotonicNs(), 60 * kSecond, &cancel, &r);
  EXPECT_EQ(ChildReport::kCancelled, r.outcome);
  // Still running, still ours: the caller gives up on it.
  EXPECT_EQ(0, waitpid(pid, nullptr, WNOHANG));
  KillAndReap(pid, fd);
  ExpectNoChild(pid);
}

TEST(ChildProcess, AfterACancelTheWaitResumes) {
  int fd;
  pid_t pid = Spawn(&fd, [](int w) {
    usleep(200000);
    SendResult(w, "late");
  });
  std::atomic<bool> cancel{true};
  ChildReport r;
  CollectChild(pid, fd, MonotonicNs(), 60 * kSecond, &cancel, &r);
  EXPECT_EQ(ChildReport::kCancelled, r.outcome);
  cancel = false;  // the interrupt raised nothing: wait again
  CollectChild(pid, fd, MonotonicNs(), 60 * kSecond, &cancel, &r);
  EXPECT_EQ(ChildReport::kOk, r.outcome) << r.error;
  EXPECT_EQ("late", r.bytes);
  ExpectNoChild(pid);
}

TEST(ChildProcess, AChildReapedElsewhereStillGivesItsResult) {
  int fd;
  pid_t pid = Spawn(&fd, [](int w) { SendResult(w, "done"); });
  // Someone else's Process.wait gets there first.
  int status;
  ASSERT_EQ(pid, waitpid(pid, &status, 0));
  ChildReport r;
  CollectChild(pid, fd, MonotonicNs(), 30 * kSecond, nullptr, &r);
  EXPECT_EQ(ChildReport::kOk, r.outcome) << r.error;
  EXPECT_FALSE(r.reaped);
  EXPECT_EQ("done", r.bytes);
}

TEST(ChildProcess, AddressSpaceLimitMakesBigAllocationsFail) {
#if defined(__SANITIZE_ADDRESS__)
  // ASan's allocator reports an mmap refused by the limit as a fatal error
  // instead of returning null.
  GTEST_SKIP() << "not under ASan";
#endif
  int fd;
  pid_t pid = Spawn(&fd, [](int w) {
    if (!LimitAddressSpace(64u << 20)) {
      SendFailure(w, "no limit");
      return;
    }
    // 1 GiB beyond a 64 MiB allowance: must fail, not be granted.
    char* big = static_cast<char*>(malloc(size_t{1} << 30));
    SendResult(w, big == nullptr ? "refused" : "granted");
  });
  ChildReport r;
  CollectChild(pid, fd, MonotonicNs(), 30 * kSecond, nullptr, &r);
  ASSERT_EQ(ChildReport::kOk, r.outcome) << r.error;
  EXPECT_EQ("refused", r.bytes);
}

TEST(ChildProcess, LowerPriorityLeavesTheParentsAlone) {
  errno = 0;
  int parent_before = getpriority(PRIO_PROCESS, 0);
  ASSERT_EQ(0, errno);
  int fd;
  pid_t pid = Spawn(&fd, [](int w) {
    if (!LowerPriority()) {
      SendFailure(w, "setpriority failed");
      return;
    }
    errno = 0;
    int nice_now = getpriority(PRIO_PROCESS, 0);
    SendResult(w, errno == 0 ? std::to_string(nice_now) : "getpriority failed");
  });
  ChildReport r;
  CollectChild(pid, fd, MonotonicNs(), 30 * kSecond, nullptr, &r);
  ASSERT_EQ(ChildReport::kOk, r.outcome) << r.error;
  EXPECT_EQ("19", r.bytes);
  EXPECT_EQ(parent_before, getpriority(PRIO_PROCESS, 0));
}

}  // namespace
}  // namespace retention
}  // namespace fathom
