// GcCounterPoll: periods from Ruby's GC counters read at intervals.
#include "gc/gc_counter_poll.h"

#include <gtest/gtest.h>

#include <vector>

namespace fathom {
namespace {

constexpr int64_t kMs = 1000 * 1000;

GcCounterReading At(int64_t now_ms, uint64_t minors, uint64_t majors, uint64_t time_ms, GcType latest = GcType::kMinor,
                    GcReason reason = GcReason::kNone, GcCause cause = GcCause::kNewobj) {
  GcCounterReading r;
  r.now_ns = now_ms * kMs;
  r.count = minors + majors;
  r.minor_count = minors;
  r.major_count = majors;
  r.time_ms = time_ms;
  r.latest_type = latest;
  r.latest_reason = reason;
  r.latest_cause = cause;
  return r;
}

TEST(GcCounterPollTest, NoGcNoPeriod) {
  GcCounterPoll poll;
  poll.Begin(At(0, 5, 1, 40));
  std::vector<GcPeriod> out;
  EXPECT_FALSE(poll.Changed(6));
  poll.Poll(At(10, 5, 1, 40), &out);
  EXPECT_TRUE(out.empty());
  EXPECT_EQ(poll.stats().polls, 1u);
  EXPECT_EQ(poll.stats().cycles, 0u);
}

TEST(GcCounterPollTest, MinorsInOneTickMakeOnePeriodWithTheirCountAndCpuTime) {
  GcCounterPoll poll;
  poll.Begin(At(0, 5, 1, 40));
  std::vector<GcPeriod> out;
  EXPECT_TRUE(poll.Changed(9));
  poll.Poll(At(10, 8, 1, 43), &out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].type, GcType::kMinor);
  EXPECT_EQ(out[0].cycles_started, 3u);
  EXPECT_EQ(out[0].minor_gcs, 3u);
  EXPECT_EQ(out[0].major_gcs, 0u);
  // GC.stat(:time) is CPU time: it is the period's cpu, and the wall time
  // and steps, which no counter measures, stay 0 (the encoders omit them).
  EXPECT_EQ(out[0].cpu_ns, 3 * kMs);
  EXPECT_EQ(out[0].wall_ns, 0);
  EXPECT_EQ(out[0].steps, 0u);
  EXPECT_EQ(out[0].end_ns, 10 * kMs);
  EXPECT_EQ(out[0].start_ns, 7 * kMs);
  EXPECT_EQ(out[0].cause, GcCause::kNewobj);
  EXPECT_EQ(out[0].reason, GcReason::kNone);
}

TEST(GcCounterPollTest, StartNeverBeforeThePreviousRead) {
  GcCounterPoll poll;
  poll.Begin(At(0, 0, 0, 0));
  std::vector<GcPeriod> out;
  poll.Poll(At(10, 0, 1, 30, GcType::kMajor, GcReason::kForce, GcCause::kMethod), &out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].start_ns, 0);
  EXPECT_EQ(out[0].cpu_ns, 30 * kMs);
}

// Minors and majors in one read: one period (one marker in the timeline),
// exact counts of each, the whole time, and the latest GC's labels.
TEST(GcCounterPollTest, MixedTickMakesOnePeriodWithBothCountsAndTheLatestLabels) {
  GcCounterPoll poll;
  poll.Begin(At(0, 0, 0, 0));
  std::vector<GcPeriod> out;
  poll.Poll(At(10, 4, 2, 7, GcType::kMajor, GcReason::kForce, GcCause::kMethod), &out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].type, GcType::kMajor);
  EXPECT_EQ(out[0].minor_gcs, 4u);
  EXPECT_EQ(out[0].major_gcs, 2u);
  EXPECT_EQ(out[0].cycles_started, 6u);
  EXPECT_EQ(out[0].cpu_ns, 7 * kMs);
  EXPECT_EQ(out[0].reason, GcReason::kForce);
  EXPECT_EQ(out[0].cause, GcCause::kMethod);
  EXPECT_EQ(poll.stats().cycles, 6u);
  EXPECT_EQ(poll.stats().periods, 1u);
}

TEST(GcCounterPollTest, AMinorLastHasNoReasonEvenAfterMajors) {
  GcCounterPoll poll;
  poll.Begin(At(0, 0, 0, 0));
  std::vector<GcPeriod> out;
  poll.Poll(At(10, 1, 1, 2, GcType::kMinor, GcReason::kForce, GcCause::kMalloc), &out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].type, GcType::kMinor);
  EXPECT_EQ(out[0].reason, GcReason::kNone);
  EXPECT_EQ(out[0].cause, GcCause::kMalloc);
}

// GC.count decides when the per-type counters disagree with it.
TEST(GcCounterPollTest, CountDecidesWhenTypeCountersDisagree) {
  GcCounterPoll poll;
  poll.Begin(At(0, 0, 0, 0));
  std::vector<GcPeriod> out;
  GcCounterReading r = At(10, 1, 0, 1);
  r.count = 3;
  poll.Poll(r, &out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].minor_gcs, 3u);
  EXPECT_EQ(out[0].major_gcs, 0u);
  EXPECT_EQ(out[0].cycles_started, 3u);
}

TEST(GcCounterPollTest, TotalsTelescopeOverManyPolls) {
  GcCounterPoll poll;
  poll.Begin(At(0, 0, 0, 0));
  std::vector<GcPeriod> out;
  uint64_t minors = 0, majors = 0, time = 0;
  int polls_with_gc = 0;
  for (int i = 1; i <= 100; i++) {
    minors += i % 3;
    majors += i % 7 == 0;
    time += i % 4;
    polls_with_gc += (i % 3 != 0 || i % 7 == 0);
    poll.Poll(At(i * 10, minors, majors, time, i % 7 == 0 ? GcType::kMajor : GcType::kMinor), &out);
  }
  uint64_t seen_minor = 0, seen_major = 0;
  int64_t seen_time = 0;
  for (const GcPeriod& p : out) {
    seen_minor += p.minor_gcs;
    seen_major += p.major_gcs;
    seen_time += p.cpu_ns;
    EXPECT_EQ(p.cycles_started, p.minor_gcs + p.major_gcs);
  }
  EXPECT_EQ(seen_minor, minors);
  EXPECT_EQ(seen_major, majors);
  EXPECT_EQ(seen_time, static_cast<int64_t>(time) * kMs);
  EXPECT_EQ(out.size(), static_cast<size_t>(polls_with_gc)) << "one period per read that saw a GC";
}

TEST(GcCounterPollTest, CountersGoingBackwardsRestartTheBaseline) {
  GcCounterPoll poll;
  poll.Begin(At(0, 10, 2, 50));
  std::vector<GcPeriod> out;
  poll.Poll(At(10, 1, 0, 1), &out);
  EXPECT_TRUE(out.empty());
  poll.Poll(At(20, 2, 0, 2), &out);
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].cycles_started, 1u);
}

}  // namespace
}  // namespace fathom
