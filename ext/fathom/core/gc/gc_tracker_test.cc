// GcTracker (coalescing of GC steps into periods), PauseHistogram, and the
// GC pprof encoding read back by go tool pprof.
#include "gc/gc_tracker.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

#include "testing/external_tools.h"
#include "gc/gc_profile.h"
#include "gc/pause_histogram.h"

namespace fathom {
namespace {

constexpr int64_t kMs = 1000 * 1000;

// Feeds one step [start, start + len) whose CPU clock could not be read (0).
bool Step(GcTracker& t, int64_t start, int64_t len) {
  t.OnStepEnter(start, 0);
  return t.OnStepExit(start + len, 0);
}

std::vector<GcPeriod> DrainAll(GcTracker& t) {
  std::vector<GcPeriod> out;
  t.Drain(&out);
  return out;
}

TEST(GcTrackerTest, MinorStepsCoalesceUntilTheIntervalPasses) {
  GcTracker t(GcTracker::Config{10 * kMs, true, 16});
  t.Reset(0);
  t.OnStepEnter(1 * kMs, 0 + 1);
  t.OnCycleStart(GcType::kMinor, GcReason::kNone, GcCause::kNewobj, 100);
  EXPECT_FALSE(t.OnStepExit(1 * kMs + 50000, 50000 + 1));
  t.OnCycleEnd(80);
  // Lazy sweep steps of the same cycle, then a second minor GC.
  for (int i = 2; i < 9; i++) EXPECT_FALSE(Step(t, i * kMs, 10000));
  t.OnStepEnter(9 * kMs, 1);
  t.OnCycleStart(GcType::kMinor, GcReason::kNone, GcCause::kNewobj, 90);
  EXPECT_FALSE(t.OnStepExit(9 * kMs + 20000, 20000 + 1));
  EXPECT_TRUE(DrainAll(t).empty());
  // 10 ms after the start of tracking: this exit closes the period.
  EXPECT_TRUE(Step(t, 10 * kMs, 10000));

  auto periods = DrainAll(t);
  ASSERT_EQ(periods.size(), 1u);
  const GcPeriod& p = periods[0];
  EXPECT_EQ(p.type, GcType::kMinor);
  EXPECT_EQ(p.cause, GcCause::kNewobj);
  EXPECT_EQ(p.steps, 10u);
  EXPECT_EQ(p.cycles_started, 2u);
  EXPECT_EQ(p.cycles_finished, 1u);
  EXPECT_EQ(p.start_ns, 1 * kMs);
  EXPECT_EQ(p.end_ns, 10 * kMs + 10000);
  EXPECT_EQ(p.wall_ns, 50000 + 7 * 10000 + 20000 + 10000);
  // Step() measures no CPU: its steps are estimated at the ratio of the two
  // measured ones (CPU == wall), so the period's CPU is its wall time.
  EXPECT_EQ(p.cpu_ns, p.wall_ns);
  EXPECT_EQ(p.heap_live_before, 100);
  EXPECT_EQ(p.heap_live_after, 80);
  EXPECT_EQ(t.pauses().count(), 10u);
  EXPECT_EQ(t.pauses().max(), 50000u);
}

// The hooks read the CPU clock only where WantsCpu() says so: the first step
// of a period, every step of a major GC, one minor step in cpu_stride. The
// period's CPU is its wall time at the measured steps' CPU/wall ratio.
TEST(GcTrackerTest, CpuIsMeasuredOnSomeStepsAndEstimatedForTheRest) {
  GcTracker::Config config{1000 * kMs, true, 16};
  config.cpu_stride = 4;
  GcTracker t(config);
  t.Reset(0);
  int measured = 0;
  int64_t clock = 0, cpu_clock = 1;
  auto step = [&](int64_t len) {
    bool want = t.WantsCpu();
    measured += want;
    t.OnStepEnter(clock, want ? cpu_clock : 0);
    EXPECT_EQ(t.StepCpuMeasured(), want);
    clock += len;
    cpu_clock += len / 2;  // the GC thread got half of each step
    t.OnStepExit(clock, want ? cpu_clock : 0);
    clock += 1000;
  };
  t.OnStepEnter(clock, 0);
  t.OnCycleStart(GcType::kMinor, GcReason::kNone, GcCause::kNewobj, 100);
  t.OnStepExit(clock + 10000, 0);  // first step, not measured (a failed read)
  clock += 20000;
  for (int i = 0; i < 39; i++) step(10000);
  EXPECT_EQ(measured, 9);  // the steps that begin with 4, 8, ..., 36 steps behind them
  ASSERT_TRUE(t.CloseOpenPeriod());
  auto periods = DrainAll(t);
  ASSERT_EQ(periods.size(), 1u);
  EXPECT_EQ(periods[0].wall_ns, 40 * 10000);
  EXPECT_EQ(periods[0].cpu_ns, 40 * 10000 / 2);

  // A major GC: every step is measured.
  t.OnStepEnter(clock, cpu_clock);
  t.OnCycleStart(GcType::kMajor, GcReason::kOldgen, GcCause::kNewobj, 100);
  t.OnStepExit(clock + 10, cpu_clock + 10);
  for (int i = 0; i < 5; i++) EXPECT_TRUE(t.WantsCpu());
}

TEST(GcTrackerTest, EveryMajorGcIsItsOwnPeriod) {
  GcTracker t(GcTracker::Config{10 * kMs, true, 16});
  t.Reset(0);
  Step(t, 100, 10);  // a minor step first, kind unknown (tracking began mid-cycle)
  for (int i = 0; i < 3; i++) {
    int64_t at = (i + 1) * 1000;
    t.OnStepEnter(at, 0);
    t.OnCycleStart(GcType::kMajor, GcReason::kForce, GcCause::kMethod, 500);
    t.OnCycleEnd(400);
    EXPECT_TRUE(t.OnStepExit(at + 300, 0)) << "a finished major GC closes the period";
  }
  auto periods = DrainAll(t);
  ASSERT_EQ(periods.size(), 4u);
  EXPECT_EQ(periods[0].type, GcType::kUnknown);  // closed when the first major started
  for (int i = 1; i <= 3; i++) {
    EXPECT_EQ(periods[i].type, GcType::kMajor);
    EXPECT_EQ(periods[i].reason, GcReason::kForce);
    EXPECT_EQ(periods[i].cycles_started, 1u);
    EXPECT_EQ(periods[i].wall_ns, 300);
    EXPECT_EQ(periods[i].start_ns, i * 1000);
  }
}

TEST(GcTrackerTest, IncrementalMajorSpansStepsAndClosesWhenItsSweepEnds) {
  GcTracker t(GcTracker::Config{1000 * kMs, true, 16});
  t.Reset(0);
  t.OnStepEnter(0, 0);
  t.OnCycleStart(GcType::kMajor, GcReason::kOldgen, GcCause::kNewobj, 1000);
  EXPECT_FALSE(t.OnStepExit(100, 0));
  for (int i = 1; i < 5; i++) EXPECT_FALSE(Step(t, i * 1000, 100));
  t.OnStepEnter(9000, 0);
  t.OnCycleEnd(700);
  EXPECT_TRUE(t.OnStepExit(9100, 0));
  auto periods = DrainAll(t);
  ASSERT_EQ(periods.size(), 1u);
  EXPECT_EQ(periods[0].steps, 6u);
  EXPECT_EQ(periods[0].wall_ns, 600);
  EXPECT_EQ(periods[0].end_ns, 9100);
  EXPECT_EQ(periods[0].heap_live_before, 1000);
  EXPECT_EQ(periods[0].heap_live_after, 700);
}

TEST(GcTrackerTest, CoalescingOffMakesAPeriodPerStep) {
  GcTracker t(GcTracker::Config{0, true, 64});
  t.Reset(0);
  for (int i = 0; i < 20; i++) EXPECT_TRUE(Step(t, i * 100, 10));
  EXPECT_EQ(DrainAll(t).size(), 20u);
}

TEST(GcTrackerTest, FullRingMergesInsteadOfDropping) {
  GcTracker t(GcTracker::Config{0, true, 4});
  t.Reset(0);
  for (int i = 0; i < 10; i++) Step(t, i * 100, 10);
  auto periods = DrainAll(t);
  ASSERT_EQ(periods.size(), 4u);
  int64_t wall = 0;
  uint32_t steps = 0;
  for (auto& p : periods) wall += p.wall_ns, steps += p.steps;
  EXPECT_EQ(wall, 100);
  EXPECT_EQ(steps, 10u);
  EXPECT_EQ(t.stats().merged_on_overflow, 6u);
  EXPECT_EQ(periods.back().end_ns, 910);
}

TEST(GcTrackerTest, ExitWithoutEnterIsIgnoredAndStopClosesTheOpenPeriod) {
  GcTracker t(GcTracker::Config{10 * kMs, true, 4});
  t.Reset(0);
  EXPECT_FALSE(t.OnStepExit(5, 5));
  EXPECT_EQ(t.stats().unmatched_exits, 1u);
  EXPECT_FALSE(t.CloseOpenPeriod());
  Step(t, 10, 5);
  EXPECT_TRUE(t.CloseOpenPeriod());
  EXPECT_EQ(DrainAll(t).size(), 1u);
}

TEST(GcTrackerTest, ADifferentCauseStartsANewPeriod) {
  GcTracker t(GcTracker::Config{10 * kMs, true, 8});
  t.Reset(0);
  t.OnStepEnter(0, 0);
  t.OnCycleStart(GcType::kMinor, GcReason::kNone, GcCause::kNewobj, 1);
  t.OnStepExit(10, 0);
  t.OnStepEnter(20, 0);
  t.OnCycleStart(GcType::kMinor, GcReason::kNone, GcCause::kMalloc, 1);
  t.OnStepExit(35, 0);
  t.CloseOpenPeriod();
  auto periods = DrainAll(t);
  ASSERT_EQ(periods.size(), 2u);
  EXPECT_EQ(periods[0].cause, GcCause::kNewobj);
  EXPECT_EQ(periods[0].wall_ns, 10);
  EXPECT_EQ(periods[1].cause, GcCause::kMalloc);
  EXPECT_EQ(periods[1].start_ns, 20);
  EXPECT_EQ(periods[1].wall_ns, 15);
}

TEST(PauseHistogramTest, BucketsCoverEveryValueInOrder) {
  for (uint64_t v : {0ull, 1ull, 3ull, 4ull, 5ull, 7ull, 8ull, 1000ull, 123456789ull, 1ull << 40, ~0ull}) {
    int b = PauseHistogram::BucketOf(v);
    ASSERT_LT(b, PauseHistogram::kBuckets);
    EXPECT_LE(PauseHistogram::LowerBound(b), v) << v;
    if (b + 1 < PauseHistogram::kBuckets) {
      EXPECT_GT(PauseHistogram::LowerBound(b + 1), v) << v;
    }
  }
}

TEST(PauseHistogramTest, PercentilesAreWithinTheBucketPrecision) {
  std::mt19937_64 rng(7);
  std::vector<uint64_t> values;
  PauseHistogram h;
  for (int i = 0; i < 10000; i++) {
    uint64_t v = 1000 + rng() % 5000000;
    values.push_back(v);
    h.Record(static_cast<int64_t>(v));
  }
  std::sort(values.begin(), values.end());
  for (double q : {0.5, 0.9, 0.99}) {
    double truth = static_cast<double>(values[static_cast<size_t>(q * values.size()) - 1]);
    EXPECT_NEAR(static_cast<double>(h.Percentile(q)), truth, truth * 0.25) << q;
  }
  EXPECT_EQ(h.max(), values.back());
  EXPECT_EQ(h.count(), 10000u);
  EXPECT_EQ(PauseHistogram().Percentile(0.5), 0u);
}

TEST(GcProfileTest, PprofHasThePlaceholderFrameLabelsAndPauseComment) {
  FATHOM_REQUIRE_TOOL("go");
  GcProfileData d;
  d.start_realtime_ns = 1700000000000000000;
  d.start_monotonic_ns = 0;
  d.end_monotonic_ns = 2000 * kMs;
  d.flush_interval_ns = 10 * kMs;
  GcPeriod minor;
  minor.type = GcType::kMinor;
  minor.cause = GcCause::kNewobj;
  minor.wall_ns = 3 * kMs;
  minor.cpu_ns = 2 * kMs;
  minor.steps = 30;
  minor.cycles_started = 5;
  GcPeriod major = minor;
  major.type = GcType::kMajor;
  major.reason = GcReason::kForce;
  major.cause = GcCause::kMethod;
  major.steps = 1;
  major.cycles_started = 1;
  d.periods = {minor, major, major, minor};
  for (int i = 0; i < 62; i++) d.pauses.Record(100000);

  test_util::TempDir dir;
  std::string path = dir.file("gc.pb.gz");
  test_util::WriteFile(path, EncodeGcPprof(d));
  auto result = test_util::RunCommand("go tool pprof -raw -symbolize=none " + test_util::ShellQuote(path));
  ASSERT_EQ(result.exit_code, 0) << result.output;
  const std::string& raw = result.output;
  EXPECT_NE(raw.find("wall/nanoseconds[dflt] cpu/nanoseconds gc_steps/count gcs/count"), std::string::npos) << raw;
  // Periods with the same labels merge: two minors, two majors.
  EXPECT_NE(raw.find("6000000    4000000         60         10"), std::string::npos) << raw;
  EXPECT_NE(raw.find("6000000    4000000          2          2"), std::string::npos) << raw;
  EXPECT_NE(raw.find("gc cause:[method] gc reason:[force] gc type:[major] thread:[GC]"), std::string::npos) << raw;
  EXPECT_NE(raw.find("gc cause:[newobj] gc type:[minor] thread:[GC]"), std::string::npos) << raw;
  EXPECT_NE(raw.find("Garbage Collection"), std::string::npos) << raw;
  EXPECT_NE(raw.find("fathom.gc.pauses count=62 total_ns=6200000 max_ns=100000"), std::string::npos) << raw;
}

}  // namespace
}  // namespace fathom
