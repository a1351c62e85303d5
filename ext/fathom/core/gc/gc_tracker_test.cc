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

// Feeds one step [start, start + len) whose CPU clock was not read.
bool Step(GcTracker& t, int64_t start, int64_t len) {
  t.OnStepEnter(start, 0);
  return t.OnStepExit(start + len, 0);
}

// What the GC hooks do (ruby/gc/gc_collector.cc), with clocks the test
// chooses: the CPU clock is read where the tracker asks for it.
struct Hooks {
  GcTracker& t;
  int cpu_reads = 0;
  void Enter(int64_t wall, int64_t cpu) {
    bool want = t.WantsCpu();
    cpu_reads += want;
    t.OnStepEnter(wall, want ? cpu : 0);
  }
  void Start(GcType type, GcReason reason, GcCause cause, int64_t wall, int64_t cpu) {
    t.OnCycleStart(type, reason, cause, 100);
    if (t.StepNeedsCpuStart()) {
      ++cpu_reads;
      t.OnStepCpuStart(wall, cpu);
    }
  }
  bool Exit(int64_t wall, int64_t cpu) {
    if (t.StepCpuMeasured()) ++cpu_reads;
    return t.OnStepExit(wall, t.StepCpuMeasured() ? cpu : 0);
  }
};

std::vector<GcPeriod> DrainAll(GcTracker& t) {
  std::vector<GcPeriod> out;
  t.Drain(&out);
  return out;
}

TEST(GcTrackerTest, MinorStepsCoalesceUntilTheIntervalPasses) {
  GcTracker t(GcTracker::Config{10 * kMs, true, 16});
  t.Reset(0);
  Hooks h{t};
  h.Enter(1 * kMs, 1);
  h.Start(GcType::kMinor, GcReason::kNone, GcCause::kNewobj, 1 * kMs, 1);
  EXPECT_FALSE(h.Exit(1 * kMs + 50000, 50000 + 1));
  // Lazy sweep steps of the same cycle (the last one ends its sweep), then
  // a second minor GC.
  for (int i = 2; i < 8; i++) EXPECT_FALSE(Step(t, i * kMs, 10000));
  t.OnStepEnter(8 * kMs, 0);
  t.OnCycleEnd(80);
  EXPECT_FALSE(t.OnStepExit(8 * kMs + 10000, 0));
  h.Enter(9 * kMs, 1);
  h.Start(GcType::kMinor, GcReason::kNone, GcCause::kNewobj, 9 * kMs, 1);
  EXPECT_FALSE(h.Exit(9 * kMs + 20000, 20000 + 1));
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
  // The two cycle starts were measured (the stride's candidates 0 and 8),
  // CPU == wall; Step() reads no clock, and its steps are charged their
  // wall time at that ratio. So the period's CPU is its wall time.
  EXPECT_EQ(p.cpu_ns, p.wall_ns);
  EXPECT_EQ(p.heap_live_before, 100);
  EXPECT_EQ(p.heap_live_after, 80);
  EXPECT_EQ(t.pauses().count(), 10u);
  EXPECT_EQ(t.pauses().max(), 50000u);
  EXPECT_EQ(t.stats().cpu_measured_steps, 2u);
}

// A minor GC's steps read the CPU clock one in cpu_stride; the others are
// charged their wall time at the measured ones' CPU/wall ratio. Every step
// of a major GC is measured.
TEST(GcTrackerTest, CpuIsMeasuredOnSomeStepsAndEstimatedForTheRest) {
  GcTracker::Config config{1000 * kMs, true, 16};
  config.cpu_stride = 4;
  GcTracker t(config);
  t.Reset(0);
  Hooks h{t};
  int64_t clock = 0, cpu_clock = 1;
  h.Enter(clock, cpu_clock);
  h.Start(GcType::kMinor, GcReason::kNone, GcCause::kNewobj, clock, cpu_clock);
  clock += 10000;
  cpu_clock += 9000;  // the thread runs 90% of every step
  h.Exit(clock, cpu_clock);  // candidate 0: measured at GC_ENTER
  EXPECT_EQ(h.cpu_reads, 2);
  for (int i = 0; i < 40; i++) {
    clock += 1000;
    h.Enter(clock, cpu_clock);
    clock += 10000;
    cpu_clock += 9000;
    h.Exit(clock, cpu_clock);
  }
  // Candidates 4, 8, ..., 40 among these 40.
  EXPECT_EQ(h.cpu_reads, 2 + 2 * 10);
  EXPECT_EQ(t.stats().cpu_measured_steps, 11u);
  ASSERT_TRUE(t.CloseOpenPeriod());
  auto periods = DrainAll(t);
  ASSERT_EQ(periods.size(), 1u);
  EXPECT_EQ(periods[0].wall_ns, 41 * 10000);
  EXPECT_EQ(periods[0].cpu_ns, 41 * 9000);

  // A major GC: every step is measured.
  h.Enter(clock, cpu_clock);
  h.Start(GcType::kMajor, GcReason::kOldgen, GcCause::kNewobj, clock, cpu_clock);
  h.Exit(clock + 10, cpu_clock + 10);
  for (int i = 0; i < 5; i++) {
    EXPECT_TRUE(t.WantsCpu());
    t.OnStepEnter(clock + 100 * i, 0);
    t.OnStepExit(clock + 100 * i + 10, 0);
  }
}

// GC.start runs its whole major GC in one step whose GC_ENTER comes before
// anyone knows it is a major: when the stride skipped that GC_ENTER, the
// CPU clock is read at GC_START, and the few microseconds before it are
// charged at the rest of the step's ratio. (Before: 0.1 ms of CPU for
// 95 ms of wall time on Ruby 3.3.8's forced majors.)
TEST(GcTrackerTest, AMajorGcsFirstStepIsMeasuredFromGcStart) {
  GcTracker::Config config{1000 * kMs, true, 16};
  config.cpu_stride = 8;
  GcTracker t(config);
  t.Reset(0);
  Hooks h{t};
  h.Enter(0, 1);  // candidate 0: measured
  h.Exit(10000, 1 + 10000);
  h.Enter(20000, 1);  // candidate 1: not measured at GC_ENTER...
  EXPECT_FALSE(t.StepCpuMeasured());
  h.Start(GcType::kMajor, GcReason::kForce, GcCause::kMethod, 22000, 5000);  // ...but at GC_START
  EXPECT_TRUE(t.StepCpuMeasured());
  t.OnCycleEnd(50);
  // 3 ms of wall time after GC_START, 1.5 ms of it on the CPU.
  EXPECT_TRUE(h.Exit(22000 + 3 * kMs, 5000 + 1500000));
  auto periods = DrainAll(t);
  ASSERT_EQ(periods.size(), 2u);
  const GcPeriod& major = periods[1];
  EXPECT_EQ(major.reason, GcReason::kForce);
  EXPECT_EQ(major.wall_ns, 2000 + 3 * kMs);
  EXPECT_EQ(major.cpu_ns, 1500000 + 1000);  // the 2 us before GC_START at the step's 50%
  EXPECT_EQ(t.stats().cpu_measured_steps, 2u);

  // A minor GC's first step stays with the stride (candidate 2: skipped).
  h.Enter(5 * kMs, 1);
  h.Start(GcType::kMinor, GcReason::kNone, GcCause::kNewobj, 5 * kMs + 1000, 6000000);
  EXPECT_FALSE(t.StepNeedsCpuStart());
  EXPECT_FALSE(t.StepCpuMeasured());
}

// When a measured step shows the thread was descheduled inside it, the
// steps after it are all measured: an estimate would charge a descheduled
// step's wall time as CPU. Then the stride comes back.
TEST(GcTrackerTest, ADescheduledStepMakesTheNextStepsMeasured) {
  GcTracker::Config config{1000 * kMs, true, 16};
  config.cpu_stride = 8;
  config.cpu_hot_steps = 16;
  GcTracker t(config);
  t.Reset(0);
  Hooks h{t};
  int64_t clock = 0, cpu_clock = 1;
  auto step = [&](int64_t wall, int64_t cpu) {
    clock += 1000;
    h.Enter(clock, cpu_clock);
    clock += wall;
    cpu_clock += cpu;
    return h.Exit(clock, cpu_clock);
  };
  step(2 * kMs, 30000);  // candidate 0, measured: 30 us of CPU in 2 ms
  EXPECT_EQ(t.stats().descheduled_steps, 1u);
  EXPECT_EQ(h.cpu_reads, 2);
  for (int i = 0; i < 16; i++) step(30000, 30000);
  EXPECT_EQ(h.cpu_reads, 2 + 2 * 16) << "all 16 steps after it measured";
  for (int i = 0; i < 16; i++) step(30000, 30000);
  EXPECT_EQ(h.cpu_reads, 2 + 2 * 16 + 2 * 2) << "the stride again: candidates 24 and 32";
  ASSERT_TRUE(t.CloseOpenPeriod());
  auto periods = DrainAll(t);
  ASSERT_EQ(periods.size(), 1u);
  // Measured: the descheduled step's 30 us and the others' CPU == wall.
  // Estimated: the 7 steps before candidate 24 at the ratio of the 17
  // measured before them, the 7 after it at that of 18.
  EXPECT_EQ(periods[0].wall_ns, 2 * kMs + 32 * 30000);
  auto ratio = [](int n) { return (30000.0 + n * 30000.0) / (2.0 * kMs + n * 30000.0); };
  int64_t estimated = 7 * static_cast<int64_t>(30000 * ratio(16)) + 7 * static_cast<int64_t>(30000 * ratio(17));
  EXPECT_EQ(periods[0].cpu_ns, 30000 + 18 * 30000 + estimated);
  EXPECT_LT(periods[0].cpu_ns, 33 * 30000) << "never the descheduled step's wall time";
}

// Ruby 3.3/3.4 enter the GC whenever a heap needs a page, GC or not: a
// step with no GC under way that starts none is idle, counted apart and
// not recorded (it would take the last GC's labels).
TEST(GcTrackerTest, StepsOutsideAnyGcAreIdleAndNotRecorded) {
  GcTracker t(GcTracker::Config{1000 * kMs, true, 16});
  t.Reset(0, /*gc_in_progress=*/false);
  Hooks h{t};
  EXPECT_FALSE(Step(t, 100, 2));
  h.Enter(1000, 1);
  h.Start(GcType::kMajor, GcReason::kForce, GcCause::kMethod, 1000, 1);
  t.OnCycleEnd(50);
  EXPECT_TRUE(h.Exit(2000, 900));
  for (int i = 0; i < 3; i++) EXPECT_FALSE(Step(t, 3000 + (i * 100), 2));
  h.Enter(4000, 1);
  h.Start(GcType::kMinor, GcReason::kNone, GcCause::kNewobj, 4000, 1);
  h.Exit(4100, 0);
  Step(t, 5000, 30);  // its lazy sweep: counted
  t.OnStepEnter(6000, 0);
  t.OnCycleEnd(40);  // the step that ends the sweep counts too
  t.OnStepExit(6030, 0);
  EXPECT_FALSE(Step(t, 7000, 2));
  ASSERT_TRUE(t.CloseOpenPeriod());
  auto periods = DrainAll(t);
  ASSERT_EQ(periods.size(), 2u);
  EXPECT_EQ(periods[0].reason, GcReason::kForce);
  EXPECT_EQ(periods[0].steps, 1u) << "one step for one GC.start";
  EXPECT_EQ(periods[0].wall_ns, 1000);
  EXPECT_EQ(periods[1].steps, 3u);
  EXPECT_EQ(t.stats().idle_steps, 5u);
  EXPECT_EQ(t.stats().steps, 4u);
  EXPECT_EQ(t.pauses().count(), 4u);

  // A GC under way when tracking starts: its steps count.
  GcTracker mid(GcTracker::Config{1000 * kMs, true, 16});
  mid.Reset(0, /*gc_in_progress=*/true);
  Step(mid, 100, 20);
  mid.OnStepEnter(200, 0);
  mid.OnCycleEnd(10);
  mid.OnStepExit(220, 0);
  EXPECT_FALSE(Step(mid, 300, 2));
  EXPECT_EQ(mid.stats().steps, 2u);
  EXPECT_EQ(mid.stats().idle_steps, 1u);
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
