#include "heap_sampling/tick_accounting.h"

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

TEST(TickPacer, ANewRunnerOrAnUnreadableClockIsDue) {
  TickPacer p(10);
  p.Wake(7, 100);
  EXPECT_EQ(p.Wake(8, 50), TickPacer::Verdict::kTick);
  EXPECT_EQ(p.Wake(8, 0), TickPacer::Verdict::kTick);  // the thread is gone
}

// 3.1: the runner flips between a thread allocating (7) and one that took
// the GVL between C calls (8). A runner coming back is credited its own CPU
// since its last reading; it is not due at once (that gave 1.3x the ticks
// per CPU second on a loaded machine).
TEST(TickPacer, ARunnerComingBackIsCreditedItsCpuSinceItsLastReading) {
  TickPacer p(10);
  EXPECT_EQ(p.Wake(7, 100), TickPacer::Verdict::kTick);  // never seen: due
  EXPECT_EQ(p.Wake(7, 104), TickPacer::Verdict::kWait);  // 4
  EXPECT_EQ(p.Wake(8, 500), TickPacer::Verdict::kTick);  // never seen: due (owed reset)
  EXPECT_EQ(p.Wake(7, 107), TickPacer::Verdict::kWait);  // back: 3 since its reading at 104
  EXPECT_EQ(p.Wake(7, 114), TickPacer::Verdict::kTick);  // 3 + 7
  EXPECT_EQ(p.Wake(8, 503), TickPacer::Verdict::kWait);  // back: 3
  EXPECT_EQ(p.Wake(8, 503), TickPacer::Verdict::kStalled);
}

// 3.2+: the summed CPU of GVL holds, however many threads share it.
TEST(TickPacer, HeldCpuPacesWhateverTheHandovers) {
  TickPacer p(10);
  EXPECT_EQ(p.WakeHeld(true, 1000), TickPacer::Verdict::kTick);  // the first wake
  EXPECT_EQ(p.WakeHeld(true, 1004), TickPacer::Verdict::kWait);
  EXPECT_EQ(p.WakeHeld(true, 1010), TickPacer::Verdict::kTick);
  EXPECT_EQ(p.WakeHeld(true, 1010), TickPacer::Verdict::kStalled);  // the owner is off a CPU
  EXPECT_EQ(p.WakeHeld(true, 1008), TickPacer::Verdict::kStalled);  // a low reading across a handover
  EXPECT_EQ(p.WakeHeld(true, 1015), TickPacer::Verdict::kWait);     // 5 since the highest (1010)
  // Nobody holds the GVL: what was used waits for the next owner (a tick at most).
  EXPECT_EQ(p.WakeHeld(false, 1040), TickPacer::Verdict::kStalled);
  EXPECT_EQ(p.WakeHeld(true, 1041), TickPacer::Verdict::kTick);
  EXPECT_EQ(p.WakeHeld(true, 1042), TickPacer::Verdict::kWait);
}

}  // namespace
}  // namespace fathom
