#include "io/child_deadline.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

namespace fathom {
namespace retention {
namespace {

constexpr int64_t kSecond = 1000000000;

// A child starved on a busy machine: 15 ms of CPU a second, well past the
// timeout in wall time, is still working and kept, up to the wall cap.
TEST(ChildDeadlineTest, ASlowChildThatWorksIsKeptUpToTheWallCap) {
  ChildDeadline d(0, 10 * kSecond);
  int64_t cpu = 0;
  for (int64_t t = 1; t < 100; t++) {
    cpu += 15000000;
    EXPECT_FALSE(d.Expired(t * kSecond, cpu)) << t;
  }
  EXPECT_TRUE(d.Expired(100 * kSecond, cpu + 15000000));
}

// Stuck: no CPU moves. Kept until the timeout, then given up on once the
// clock has been still for 2 s (it was still from the start here).
TEST(ChildDeadlineTest, AChildWhoseCpuStandsStillGoesAtTheTimeout) {
  ChildDeadline d(0, 10 * kSecond);
  for (int64_t t = 0; t < 10; t++) EXPECT_FALSE(d.Expired(t * kSecond, 5000000));
  EXPECT_TRUE(d.Expired(10 * kSecond, 5000000));
}

// Working until the timeout, then stuck: 2 s of stillness past it.
TEST(ChildDeadlineTest, AChildThatStopsWorkingGoesTwoSecondsLater) {
  ChildDeadline d(0, 10 * kSecond);
  for (int64_t t = 0; t <= 10; t++) EXPECT_FALSE(d.Expired(t * kSecond, t * 70000000)) << t;
  EXPECT_FALSE(d.Expired(11 * kSecond, 700000000));
  EXPECT_TRUE(d.Expired(12 * kSecond, 700000000));
}

// Starved: runnable all along but given no CPU for seconds at a time (nice
// 19 beside busier processes) is slow, not stuck: kept up to the wall cap.
// The same stillness while asleep is stuck.
TEST(ChildDeadlineTest, ARunnableChildWithoutCpuIsKeptUpToTheWallCap) {
  ChildDeadline starved(0, 10 * kSecond);
  for (int64_t t = 1; t < 100; t++) EXPECT_FALSE(starved.Expired(t * kSecond, 5000000, /*runnable=*/true)) << t;
  EXPECT_TRUE(starved.Expired(100 * kSecond, 5000000, true));
  ChildDeadline asleep(0, 10 * kSecond);
  for (int64_t t = 1; t < 10; t++) EXPECT_FALSE(asleep.Expired(t * kSecond, 5000000, true));
  EXPECT_FALSE(asleep.Expired(10 * kSecond, 5000000, true));
  EXPECT_FALSE(asleep.Expired(11 * kSecond, 5000000, false));
  EXPECT_TRUE(asleep.Expired(12 * kSecond, 5000000, false));
}

// Runaway: its own CPU reaches the timeout, whatever the wall clock says.
TEST(ChildDeadlineTest, AChildThatBurnsTheTimeoutInCpuGoes) {
  ChildDeadline d(0, 10 * kSecond);
  EXPECT_FALSE(d.Expired(5 * kSecond, 9 * kSecond));
  EXPECT_TRUE(d.Expired(6 * kSecond, 10 * kSecond));
}

// No CPU clock to read: wall time alone, as before.
TEST(ChildDeadlineTest, UnreadableCpuFallsBackToWallTime) {
  ChildDeadline d(0, 10 * kSecond);
  EXPECT_FALSE(d.Expired(9 * kSecond, -1));
  EXPECT_TRUE(d.Expired(10 * kSecond, -1));
  EXPECT_EQ(d.WallLeftMs(4 * kSecond), 6000);
  EXPECT_EQ(d.WallLeftMs(11 * kSecond), 0);
}

TEST(ChildDeadlineTest, ReadsAChildsCpuClock) {
  pid_t pid = fork();
  if (pid == 0) {
    volatile uint64_t x = 0;
    for (;;) x++;  // killed below
  }
  ASSERT_GT(pid, 0);
  int64_t first = ChildCpuNs(pid);
  usleep(200000);
  int64_t later = ChildCpuNs(pid);
  kill(pid, SIGKILL);
  int status;
  waitpid(pid, &status, 0);
  EXPECT_GE(first, 0);
  EXPECT_GT(later, first);
  EXPECT_EQ(ChildCpuNs(pid), -1);  // reaped: gone
}

TEST(ChildDeadlineTest, ReadsWhetherAChildIsRunnable) {
  pid_t spinner = fork();
  if (spinner == 0) {
    volatile uint64_t x = 0;
    for (;;) x++;  // killed below
  }
  pid_t sleeper = fork();
  if (sleeper == 0) {
    for (;;) pause();  // killed below
  }
  ASSERT_GT(spinner, 0);
  ASSERT_GT(sleeper, 0);
  usleep(100000);
  EXPECT_TRUE(ChildRunnable(spinner));
  EXPECT_FALSE(ChildRunnable(sleeper));
  for (pid_t pid : {spinner, sleeper}) {
    kill(pid, SIGKILL);
    int status;
    waitpid(pid, &status, 0);
  }
  EXPECT_FALSE(ChildRunnable(spinner));  // reaped: gone
}

}  // namespace
}  // namespace retention
}  // namespace fathom
