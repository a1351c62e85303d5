// CpuAggregate's stacks for samples taken while a GC ran (no walk): a thread
// the GC did not stop keeps its previous stack, across windows; with none
// yet, the sample waits for the thread's next stack.
#include "cpu/cpu_aggregate.h"

#include <gtest/gtest.h>

#include <utility>
#include <vector>

namespace fathom {
namespace {

constexpr int64_t kMs = 1000000;

struct Sample {
  int32_t tid;
  uint16_t depth;           // 0: taken during a GC (stack_from_previous unless kGc)
  uint64_t base = 0x100;    // frame handles base, base+8, ...
  int64_t cpu = 0, wall = 10 * kMs;
  ThreadState state = ThreadState::kBlocked;
  GvlSincePrevious gvl = GvlSincePrevious::kUnknown;  // kUnknown: Ruby 3.1
  bool probe = false;
};

void Add(CpuAggregate* agg, const Sample& s, int64_t time_ns = 0) {
  SampleHeader h;
  h.time_ns = time_ns;
  h.thread_id = s.tid;
  h.depth = s.depth;
  h.cpu_delta_ns = s.cpu;
  h.wall_delta_ns = s.wall;
  h.state = s.state;
  h.stack_from_previous = s.depth == 0 && s.state != ThreadState::kGc;
  h.gvl_since_previous = s.gvl;
  h.stack_probe = s.probe;
  std::vector<uint64_t> frames(s.depth + 1);
  std::vector<int32_t> lines(s.depth + 1);
  for (uint16_t i = 0; i < s.depth; i++) {
    frames[i] = s.base + 8 * i;
    lines[i] = i + 1;
  }
  agg->Add(h, frames.data(), lines.data());
}

// (thread, frame count, samples) per row, in insertion order.
std::vector<std::vector<int64_t>> Rows(const CpuAggregate& agg) {
  std::vector<std::vector<int64_t>> rows;
  agg.ForEach([&](const CpuKey& k, const CpuValues& v) {
    rows.push_back({k.thread_id, static_cast<int64_t>(agg.stacks().frames(k.stack_id).size()), v.samples});
  });
  return rows;
}

using R = std::vector<std::vector<int64_t>>;

CpuAggregate WallAggregate() {
  CpuAggregate agg;
  agg.set_mode(CpuMode::kWall);
  return agg;
}

TEST(CpuAggregateTest, ASampleTakenDuringGcReusesItsThreadsPreviousStack) {
  CpuAggregate agg = WallAggregate();
  Add(&agg, {1, 3});
  Add(&agg, {1, 0});
  Add(&agg, {2, 0, 0, 0, 10 * kMs, ThreadState::kGc});  // stopped by the GC: its own row, no stack
  EXPECT_EQ(Rows(agg), (R{{1, 3, 2}, {2, 0, 1}}));
}

// Ruby 3.1 signals a thread asleep since before the profiler started; its
// first sample fell in a GC. Its next sample reads the stack it slept in,
// and it barely ran in between: both samples are on that stack.
TEST(CpuAggregateTest, AThreadsFirstSampleInAGcTakesItsNextStackIfItDidNotRun) {
  CpuAggregate agg = WallAggregate();
  agg.set_keep_timeline(true);
  Add(&agg, {7, 0}, 1 * kMs);
  Add(&agg, {7, 0}, 2 * kMs);  // a second GC: held too
  EXPECT_EQ(Rows(agg), R{});
  Add(&agg, {7, 2, 0x100, 0, 10 * kMs}, 3 * kMs);  // no CPU since: asleep
  EXPECT_EQ(Rows(agg), (R{{7, 2, 3}}));
  ASSERT_EQ(agg.timeline().size(), 3u);
  for (const CpuTimelineSample& t : agg.timeline()) EXPECT_EQ(agg.stacks().frames(t.stack_id).size(), 2u);
  EXPECT_EQ(agg.timeline()[0].time_ns, 1 * kMs);  // in the thread's time order
}

// A thread that ran since (its CPU clock moved for a quarter of the time or
// more) may have left the stack it had: the held sample keeps no stack.
TEST(CpuAggregateTest, AHeldSampleKeepsNoStackIfTheThreadRanSince) {
  CpuAggregate agg = WallAggregate();
  Add(&agg, {7, 0});
  Add(&agg, {7, 2, 0x100, 3 * kMs, 10 * kMs, ThreadState::kRunning});  // 30% CPU
  EXPECT_EQ(Rows(agg), (R{{7, 0, 1}, {7, 2, 1}}));
}

TEST(CpuAggregateTest, AHeldSampleWithNoLaterStackSettlesEmpty) {
  CpuAggregate agg = WallAggregate();
  Add(&agg, {7, 0});
  Add(&agg, {8, 0, 0, 0, 10 * kMs, ThreadState::kGc});  // another thread's next sample is no answer
  agg.SettlePending();
  EXPECT_EQ(Rows(agg), (R{{8, 0, 1}, {7, 0, 1}}));
  agg.SettlePending();  // once
  EXPECT_EQ(Rows(agg), (R{{8, 0, 1}, {7, 0, 1}}));
}

// Always-on writes a window at a time: a thread asleep across the boundary
// keeps its stack in the next window.
TEST(CpuAggregateTest, APreviousStackOutlivesTheWindow) {
  CpuAggregate agg = WallAggregate();
  Add(&agg, {1, 3});
  agg.Clear();
  EXPECT_EQ(agg.stacks().stack_count(), 1u);  // the thread's previous stack, still referenced
  Add(&agg, {1, 0});
  EXPECT_EQ(Rows(agg), (R{{1, 3, 1}}));
  agg.Clear();
  agg.ForgetThreads();
  EXPECT_EQ(agg.stacks().stack_count(), 0u);
}

// Ruby 3.1 hands an ended thread's native thread (and id) to the next Ruby
// thread: that thread's first sample in a GC must not get the old one's stack.
TEST(CpuAggregateTest, AnEndedThreadsStackIsForgotten) {
  CpuAggregate agg = WallAggregate();
  Add(&agg, {1, 3});
  Add(&agg, {1, 0});  // was asleep
  agg.ForgetThread(1);
  Add(&agg, {1, 0});  // the next thread with the id
  agg.SettlePending();
  EXPECT_EQ(Rows(agg), (R{{1, 3, 2}, {1, 0, 1}}));
  agg.Clear();
  EXPECT_EQ(agg.stacks().stack_count(), 0u);
}

// A thread ends with a held sample: it settles then, with no stack.
TEST(CpuAggregateTest, ForgettingAThreadSettlesItsHeldSamples) {
  CpuAggregate agg = WallAggregate();
  Add(&agg, {4, 0});
  agg.ForgetThread(4);
  Add(&agg, {4, 2});  // a new thread with the id: not the old one's stack
  EXPECT_EQ(Rows(agg), (R{{4, 0, 1}, {4, 2, 1}}));
}

// Ruby 3.2+: the GVL events say the thread did not take the GVL since its
// held sample, so it stayed in its C call however much CPU it burned.
TEST(CpuAggregateTest, NoGvlTakenSinceResolvesAThreadBurningCpuInC) {
  CpuAggregate agg;  // CPU mode
  Add(&agg, {3, 0, 0, 10 * kMs, 10 * kMs, ThreadState::kBlocked, GvlSincePrevious::kNotTaken});
  Add(&agg, {3, 2, 0x100, 10 * kMs, 10 * kMs, ThreadState::kBlocked, GvlSincePrevious::kNotTaken});
  EXPECT_EQ(Rows(agg), (R{{3, 2, 2}}));
}

// Ruby 3.2+, wall mode: a thread's previous sample was taken while it ran
// Ruby code; it then blocked elsewhere and was woken during a GC. Its
// previous stack is not where it waited: the sample is held, and the probe
// its RESUMED takes (no time of its own) gives it the stack it waited in.
TEST(CpuAggregateTest, AWakeDuringGcAfterTheGvlWasTakenWaitsForTheProbe) {
  CpuAggregate agg = WallAggregate();
  agg.set_keep_timeline(true);
  Add(&agg, {5, 3, 0x100, 10 * kMs, 10 * kMs, ThreadState::kRunning, GvlSincePrevious::kTaken});  // work
  Add(&agg, {5, 0, 0, 0, 900 * kMs, ThreadState::kBlocked, GvlSincePrevious::kTaken});  // woken in a GC
  EXPECT_EQ(Rows(agg), (R{{5, 3, 1}}));
  // Then waits for the GVL while the GC goes on: charged to the GC, no stack
  // read, and no reason to give up on the held sample.
  Add(&agg, {5, 0, 0, 0, 10 * kMs, ThreadState::kGc, GvlSincePrevious::kNotTaken});
  EXPECT_EQ(Rows(agg), (R{{5, 3, 1}, {5, 0, 1}}));
  Add(&agg, {5, 4, 0x900, 0, 0, ThreadState::kGvlWait, GvlSincePrevious::kNotTaken, /*probe=*/true});
  EXPECT_EQ(Rows(agg), (R{{5, 3, 1}, {5, 0, 1}, {5, 4, 1}}));
  EXPECT_EQ(agg.total().wall_ns, 920 * kMs);  // the probe adds no time
  EXPECT_EQ(agg.timeline().size(), 3u);
  // The probe's stack is the thread's previous stack from now on.
  Add(&agg, {5, 0, 0, 0, 10 * kMs, ThreadState::kBlocked, GvlSincePrevious::kNotTaken});
  EXPECT_EQ(Rows(agg), (R{{5, 3, 1}, {5, 0, 1}, {5, 4, 2}}));
  // A GC sample of a thread that ran since its held one (3.1: its CPU
  // clock moved) gives up on it.
  Add(&agg, {5, 0, 0, 0, 10 * kMs, ThreadState::kBlocked, GvlSincePrevious::kTaken});
  Add(&agg, {5, 0, 0, 10 * kMs, 10 * kMs, ThreadState::kGc});
  EXPECT_EQ(Rows(agg), (R{{5, 3, 1}, {5, 0, 2}, {5, 4, 2}, {5, 0, 1}}));  // gc 2; blocked, no stack, 1
}

// Held samples join into one wait only while the thread stays put; a held
// sample after it took the GVL again starts a new one, and the older ones
// keep no stack.
TEST(CpuAggregateTest, HeldSamplesSplitWhereTheThreadTookTheGvl) {
  CpuAggregate agg = WallAggregate();
  Add(&agg, {6, 0, 0, 0, 10 * kMs, ThreadState::kBlocked, GvlSincePrevious::kTaken});
  Add(&agg, {6, 0, 0, 0, 10 * kMs, ThreadState::kBlocked, GvlSincePrevious::kTaken});
  EXPECT_EQ(Rows(agg), (R{{6, 0, 1}}));
  Add(&agg, {6, 2, 0x100, 0, 0, ThreadState::kGvlWait, GvlSincePrevious::kNotTaken, /*probe=*/true});
  EXPECT_EQ(Rows(agg), (R{{6, 0, 1}, {6, 2, 1}}));
}

// A thread sampled only during GCs (GC.stress) does not pile up held
// samples: past a bound they settle with no stack.
TEST(CpuAggregateTest, HeldSamplesAreBounded) {
  CpuAggregate agg = WallAggregate();
  for (int i = 0; i < 5000; i++) Add(&agg, {9, 0});
  int64_t settled = 0;
  agg.ForEach([&](const CpuKey&, const CpuValues& v) { settled += v.samples; });
  EXPECT_EQ(settled, 4096);
  agg.SettlePending();
  EXPECT_EQ(agg.total().samples, 5000);
}

}  // namespace
}  // namespace fathom
