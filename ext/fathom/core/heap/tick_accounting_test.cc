#include "heap/tick_accounting.h"

#include <gtest/gtest.h>

namespace fathom {
namespace {

TEST(TickAccounting, SkippedTicksAreNotLost) {
  TickCounts c{530, 25, 5, 500};
  EXPECT_EQ(c.eligible(), 500u);
  EXPECT_EQ(c.lost(), 0u);
  EXPECT_FALSE(MostTicksLost(c));
  EXPECT_EQ(TickComment(c),
            "Sampling: 500 bursts from 500 timer ticks that could start one (of 530; 25 while a burst waited for an "
            "allocation, 5 with no thread running Ruby)");
}

TEST(TickAccounting, MostTicksLostWhenFewBurstsCame) {
  TickCounts c{100, 0, 0, 16};
  EXPECT_EQ(c.lost(), 84u);
  EXPECT_TRUE(MostTicksLost(c));
  EXPECT_FALSE(MostTicksLost(TickCounts{100, 0, 0, 50}));  // half is not most
}

TEST(TickAccounting, TooFewTicksToSay) {
  EXPECT_FALSE(MostTicksLost(TickCounts{10, 0, 0, 0}));
  // Counters read at slightly different moments must not underflow.
  TickCounts c{5, 4, 3, 9};
  EXPECT_EQ(c.eligible(), 0u);
  EXPECT_EQ(c.lost(), 0u);
}

TEST(TickPacer, TicksPerIntervalOfTheRunnersCpu) {
  TickPacer p(10);
  EXPECT_EQ(p.Wake(7, 100), TickPacer::Verdict::kTick);  // a new runner is due at once
  EXPECT_EQ(p.Wake(7, 104), TickPacer::Verdict::kWait);  // 4 of 10
  EXPECT_EQ(p.Wake(7, 110), TickPacer::Verdict::kTick);  // 10: due, nothing owed
  EXPECT_EQ(p.Wake(7, 115), TickPacer::Verdict::kWait);
  EXPECT_EQ(p.Wake(7, 115), TickPacer::Verdict::kStalled);  // off a CPU for a whole wake period
  EXPECT_EQ(p.Wake(7, 121), TickPacer::Verdict::kTick);     // 5 + 6
}

TEST(TickPacer, ALongStretchOwesOneTickNotAVolley) {
  TickPacer p(10);
  p.Wake(7, 0 + 1);
  EXPECT_EQ(p.Wake(7, 1001), TickPacer::Verdict::kTick);
  EXPECT_EQ(p.Wake(7, 1002), TickPacer::Verdict::kTick);  // one interval carried over
  EXPECT_EQ(p.Wake(7, 1003), TickPacer::Verdict::kWait);
}

TEST(TickPacer, TheFirstRunnerOrAnUnreadableClockIsDue) {
  TickPacer p(10);
  EXPECT_EQ(p.Wake(7, 100), TickPacer::Verdict::kTick);
  EXPECT_EQ(p.Wake(7, 0), TickPacer::Verdict::kTick);  // the thread is gone
}

// A handover is not a tick: a thread never seen brings no credit, one seen
// before at most an interval of its CPU since its last reading.
TEST(TickPacer, AHandoverCreditsAtMostAnInterval) {
  TickPacer p(10);
  EXPECT_EQ(p.Wake(7, 100), TickPacer::Verdict::kTick);
  EXPECT_EQ(p.Wake(7, 104), TickPacer::Verdict::kWait);   // 4 owed
  EXPECT_EQ(p.Wake(8, 5000), TickPacer::Verdict::kWait);  // never seen: 0 (its 5000 ns went to C)
  EXPECT_EQ(p.Wake(8, 5003), TickPacer::Verdict::kWait);  // 7 owed
  EXPECT_EQ(p.Wake(7, 150), TickPacer::Verdict::kTick);   // back: 46 since its reading, credited 10
  EXPECT_EQ(p.Wake(8, 9000), TickPacer::Verdict::kTick);  // seen: 3997 credited as 10
}

// Threads trading the GVL at every wake-up: the ticks follow the CPU the
// two used (within an interval per handover), not one per wake-up.
TEST(TickPacer, GvlPingPongTicksByCpuNotByWakeUps) {
  TickPacer p(10);
  p.Wake(1, 1000);
  p.Wake(2, 1000);
  int ticks = 0;
  // Each runs 2 ns of CPU per wake-up turn: 4 ns per two wake-ups, 400 ns
  // over 200: ~40 ticks at 10 ns, not 200.
  for (int i = 1; i <= 100; i++) {
    ticks += p.Wake(1, 1000 + 2 * i) == TickPacer::Verdict::kTick;
    ticks += p.Wake(2, 1000 + 2 * i) == TickPacer::Verdict::kTick;
  }
  EXPECT_GE(ticks, 30);
  EXPECT_LE(ticks, 45);
}

}  // namespace
}  // namespace fathom
