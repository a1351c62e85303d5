#include "io/child_isolation.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <arpa/inet.h>
#include <netinet/in.h>

#include <algorithm>
#include <cerrno>
#include <string>
#include <vector>

#include "base/clock.h"

namespace fathom {
namespace retention {
namespace {

constexpr int kHighest = 512;  // the highest descriptor the checks look at

enum class Method { kAuto, kListing, kNumber };

// What a child saw after closing: the descriptors still open (by number)
// and, for 0-2, whether each is /dev/null.
struct Seen {
  std::vector<int> open;
  bool stdio_null[3] = {false, false, false};
};

bool IsDevNull(int fd) {
  struct stat a, b;
  if (fstat(fd, &a) != 0 || stat("/dev/null", &b) != 0) return false;
  return S_ISCHR(a.st_mode) && a.st_rdev == b.st_rdev;
}

// Forks a child that opens a few descriptors of its own (a pipe, a socket
// pair, a file, one at a high number), closes all but `keep` plus its
// report pipe with `method`, and reports what is left open.
Seen RunChild(Method method, std::vector<int> keep) {
  int p[2];
  EXPECT_EQ(0, pipe(p));
  pid_t pid = fork();
  if (pid == 0) {
    int sv[2];
    int extra[2];
    if (pipe(extra) != 0 || socketpair(AF_UNIX, SOCK_STREAM, 0, sv) != 0) _exit(10);
    if (open("/dev/zero", O_RDONLY) < 0) _exit(11);
    if (dup2(extra[0], 300) != 300) _exit(12);
    keep.push_back(p[1]);
    switch (method) {
      case Method::kAuto: CloseInheritedDescriptors(keep.data(), keep.size()); break;
      case Method::kListing:
        if (!internal::CloseByListing(3, keep.data(), keep.size())) _exit(13);
        break;
      case Method::kNumber: internal::CloseByNumber(3, keep.data(), keep.size()); break;
    }
    std::string out;
    for (int fd = 0; fd <= kHighest; fd++)
      if (fcntl(fd, F_GETFD) != -1) out += std::to_string(fd) + (fd <= 2 && IsDevNull(fd) ? "n" : "") + " ";
    if (write(p[1], out.data(), out.size()) != static_cast<ssize_t>(out.size())) _exit(14);
    _exit(0);
  }
  close(p[1]);
  std::string got;
  char buf[4096];
  ssize_t n;
  while ((n = read(p[0], buf, sizeof buf)) > 0) got.append(buf, static_cast<size_t>(n));
  close(p[0]);
  int status = 0;
  EXPECT_EQ(pid, waitpid(pid, &status, 0));
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0) << "child status " << status;
  Seen seen;
  size_t pos = 0;
  while (pos < got.size()) {
    size_t space = got.find(' ', pos);
    std::string item = got.substr(pos, space - pos);
    pos = space + 1;
    int fd = std::stoi(item);
    seen.open.push_back(fd);
    if (fd <= 2) seen.stdio_null[fd] = item.back() == 'n';
  }
  return seen;
}

// What stayed open above stdio: the kept descriptors and the report pipe.
std::vector<int> Above2(const Seen& s) {
  std::vector<int> out;
  for (int fd : s.open)
    if (fd > 2) out.push_back(fd);
  return out;
}

TEST(ChildIsolation, OnlyTheKeptDescriptorsStayOpen) {
  // Descriptors of the parent's a child would inherit.
  int listening = socket(AF_INET, SOCK_STREAM, 0);
  int file = open("/dev/null", O_RDONLY | O_CLOEXEC);  // CLOEXEC: inherited across fork all the same
  int kept = open("/dev/zero", O_RDONLY);
  ASSERT_GE(listening, 0);
  ASSERT_GE(kept, 0);
  Seen s = RunChild(Method::kAuto, {kept});
  std::vector<int> above = Above2(s);
  // The kept one and the report pipe: nothing else.
  ASSERT_EQ(2u, above.size()) << ::testing::PrintToString(s.open);
  EXPECT_NE(above.end(), std::find(above.begin(), above.end(), kept));
  EXPECT_EQ(above.end(), std::find(above.begin(), above.end(), listening));
  EXPECT_EQ(above.end(), std::find(above.begin(), above.end(), file));
#if defined(__SANITIZE_ADDRESS__)
  const int stdio_redirected = 2;  // stderr stays: AddressSanitizer reports there
#else
  const int stdio_redirected = 3;
#endif
  for (int fd = 0; fd < stdio_redirected; fd++) EXPECT_TRUE(s.stdio_null[fd]) << "fd " << fd << " is not /dev/null";
  close(listening);
  close(file);
  close(kept);
}

TEST(ChildIsolation, TheFallbacksCloseTheSame) {
  int kept = open("/dev/zero", O_RDONLY);
  int dropped = open("/dev/null", O_RDONLY);
  for (Method m : {Method::kListing, Method::kNumber}) {
    Seen s = RunChild(m, {kept});
    std::vector<int> above = Above2(s);
    ASSERT_EQ(2u, above.size()) << ::testing::PrintToString(s.open);
    EXPECT_NE(above.end(), std::find(above.begin(), above.end(), kept));
    EXPECT_EQ(above.end(), std::find(above.begin(), above.end(), dropped));
    EXPECT_EQ(above.end(), std::find(above.begin(), above.end(), 300));
  }
  close(kept);
  close(dropped);
}

// A kept descriptor numbered 0-2 (the parent had closed its stdin, so the
// pipe took 0) is not replaced by /dev/null.
TEST(ChildIsolation, AKeptDescriptorAmongStdioStays) {
  int p[2];
  ASSERT_EQ(0, pipe(p));
  pid_t pid = fork();
  if (pid == 0) {
    close(p[0]);
    close(0);
    int r[2];
    if (pipe(r) != 0 || r[0] != 0) _exit(10);  // the lowest free number: 0
    int keep[] = {r[0], p[1]};
    CloseInheritedDescriptors(keep, 2);
    struct stat st;
    bool fifo = fstat(0, &st) == 0 && S_ISFIFO(st.st_mode);
#if defined(__SANITIZE_ADDRESS__)
    bool out_null = IsDevNull(1);  // stderr stays: AddressSanitizer reports there
#else
    bool out_null = IsDevNull(1) && IsDevNull(2);
#endif
    bool closed = fcntl(r[1], F_GETFD) == -1;
    char c = fifo && out_null && closed ? 'y' : 'n';
    if (write(p[1], &c, 1) != 1) _exit(11);
    _exit(0);
  }
  close(p[1]);
  char c = 0;
  EXPECT_EQ(1, read(p[0], &c, 1));
  EXPECT_EQ('y', c);
  close(p[0]);
  int status;
  EXPECT_EQ(pid, waitpid(pid, &status, 0));
}

// A child that closed a listening socket's copy: the parent closing its own
// is the socket's end, so the port can be bound again at once.
TEST(ChildIsolation, AClosedListenerCanBeBoundAgain) {
  int s = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(s, 0);
  int one = 1;
  setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in a = {};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(0, bind(s, reinterpret_cast<sockaddr*>(&a), sizeof a));
  ASSERT_EQ(0, listen(s, 8));
  socklen_t len = sizeof a;
  ASSERT_EQ(0, getsockname(s, reinterpret_cast<sockaddr*>(&a), &len));
  int p[2];
  ASSERT_EQ(0, pipe(p));
  pid_t pid = fork();
  if (pid == 0) {
    int keep[] = {p[1]};
    CloseInheritedDescriptors(keep, 1);
    char c = 'c';
    if (write(p[1], &c, 1) != 1) _exit(10);
    pause();  // holds on, as a walking child does, until killed
    _exit(0);
  }
  close(p[1]);
  char c;
  ASSERT_EQ(1, read(p[0], &c, 1));  // the child has closed what it inherited
  close(s);
  int again = socket(AF_INET, SOCK_STREAM, 0);
  setsockopt(again, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  EXPECT_EQ(0, bind(again, reinterpret_cast<sockaddr*>(&a), sizeof a)) << "errno " << errno;
  close(again);
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
  close(p[0]);
}

// A grandchild that called DieWithParent dies when its parent is
// SIGKILLed: the test is its subreaper, so it can wait for it and see how
// it ended.
TEST(ChildIsolation, DiesWithItsParent) {
  ASSERT_EQ(0, prctl(PR_SET_CHILD_SUBREAPER, 1));
  int p[2];
  ASSERT_EQ(0, pipe(p));
  pid_t middle = fork();
  if (middle == 0) {
    pid_t parent = getpid();
    if (fork() == 0) {
      if (!DieWithParent(parent)) _exit(20);
      pid_t me = getpid();
      if (write(p[1], &me, sizeof me) != static_cast<ssize_t>(sizeof me)) _exit(21);
      for (;;) pause();  // only a signal ends it
    }
    for (;;) pause();
  }
  close(p[1]);
  pid_t grandchild = 0;
  ASSERT_EQ(static_cast<ssize_t>(sizeof grandchild), read(p[0], &grandchild, sizeof grandchild));
  close(p[0]);
  kill(middle, SIGKILL);
  int status;
  ASSERT_EQ(middle, waitpid(middle, &status, 0));
  // The kernel sends SIGKILL as the parent goes; 10 s is a bound, not a wait.
  int64_t deadline = MonotonicNs() + 10 * 1000000000LL;
  pid_t r = 0;
  while ((r = waitpid(grandchild, &status, WNOHANG)) == 0 && MonotonicNs() < deadline) usleep(1000);
  if (r == 0) {
    kill(grandchild, SIGKILL);
    waitpid(grandchild, &status, 0);
    ADD_FAILURE() << "the grandchild outlived its parent by 10 s";
  } else {
    EXPECT_EQ(grandchild, r);
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL) << status;
  }
  prctl(PR_SET_CHILD_SUBREAPER, 0);
}

TEST(ChildIsolation, AParentAlreadyGoneIsSeen) {
  pid_t pid = fork();
  if (pid == 0) _exit(DieWithParent(getppid() + 1) ? 1 : 0);  // not its parent: as if it had died
  int status;
  ASSERT_EQ(pid, waitpid(pid, &status, 0));
  EXPECT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
}

}  // namespace
}  // namespace retention
}  // namespace fathom
