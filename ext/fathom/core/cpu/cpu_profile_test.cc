// SampleRing (the signal handler's buffer), CpuAggregate and the CPU/wall
// pprof encoding read back by go tool pprof.
#include "cpu/cpu_profile.h"

#include <gtest/gtest.h>

#include <atomic>
#include <set>
#include <thread>
#include <vector>

#include "cpu/cpu_aggregate.h"
#include "cpu/sample_ring.h"
#include "testing/external_tools.h"
#include "testing/firefox_format_check.h"
#include "testing/mini_json.h"

namespace fathom {
namespace {

// Writes one sample of `depth` frames (handles base, base+8, ...).
bool Push(SampleRing& ring, int32_t tid, uint64_t base, uint16_t depth, int64_t cpu = 10, int64_t wall = 20,
          ThreadState state = ThreadState::kRunning) {
  SampleRing::Slot s = ring.Claim();
  if (!s) return false;
  s.header->thread_id = tid;
  s.header->depth = depth;
  s.header->cpu_delta_ns = cpu;
  s.header->wall_delta_ns = wall;
  s.header->state = state;
  s.header->truncated = false;
  for (uint16_t i = 0; i < depth; i++) {
    s.frames[i] = base + 8 * i;
    s.lines[i] = i + 1;
  }
  ring.Publish(s);
  return true;
}

TEST(SampleRingTest, RoundsCapacityUpAndDrainsInOrder) {
  SampleRing ring(5, 4);
  EXPECT_EQ(ring.capacity(), 8u);
  for (int i = 0; i < 3; i++) ASSERT_TRUE(Push(ring, i, 0x1000, 2));
  EXPECT_EQ(ring.pending(), 3u);
  std::vector<int32_t> seen;
  size_t n = ring.Drain([&](const SampleHeader& h, const uint64_t* frames, const int32_t* lines) {
    seen.push_back(h.thread_id);
    EXPECT_EQ(frames[1], 0x1008u);
    EXPECT_EQ(lines[1], 2);
  });
  EXPECT_EQ(n, 3u);
  EXPECT_EQ(seen, (std::vector<int32_t>{0, 1, 2}));
  EXPECT_EQ(ring.pending(), 0u);
}

TEST(SampleRingTest, FullRingCountsDropsAndNeverBlocks) {
  SampleRing ring(4, 1);
  for (int i = 0; i < 4; i++) ASSERT_TRUE(Push(ring, i, 8, 1));
  EXPECT_FALSE(Push(ring, 9, 8, 1));
  EXPECT_FALSE(Push(ring, 9, 8, 1));
  EXPECT_EQ(ring.dropped(), 2u);
  EXPECT_EQ(ring.Drain([](const SampleHeader&, const uint64_t*, const int32_t*) {}), 4u);
  // Cells are reusable after a drain, many times around.
  for (int round = 0; round < 10; round++) {
    for (int i = 0; i < 4; i++) ASSERT_TRUE(Push(ring, i, 8, 1));
    EXPECT_EQ(ring.Drain([](const SampleHeader&, const uint64_t*, const int32_t*) {}), 4u);
  }
}

TEST(SampleRingTest, UnpublishedCellStopsTheConsumerUntilPublished) {
  SampleRing ring(4, 1);
  SampleRing::Slot claimed = ring.Claim();  // a handler interrupted mid-write
  ASSERT_TRUE(claimed);
  ASSERT_TRUE(Push(ring, 7, 8, 1));
  int pending_seen = 0;
  ring.ForEachPending([&](const SampleHeader&, const uint64_t*, const int32_t*) { pending_seen++; });
  EXPECT_EQ(pending_seen, 0);
  EXPECT_EQ(ring.Drain([](const SampleHeader&, const uint64_t*, const int32_t*) {}), 0u);
  claimed.header->thread_id = 6;
  claimed.header->depth = 0;
  ring.Publish(claimed);
  std::vector<int32_t> seen;
  ring.Drain([&](const SampleHeader& h, const uint64_t*, const int32_t*) { seen.push_back(h.thread_id); });
  EXPECT_EQ(seen, (std::vector<int32_t>{6, 7}));
}

// Several producers (as several threads' signal handlers) and one consumer:
// every record arrives whole exactly once or is counted as dropped.
TEST(SampleRingTest, ConcurrentProducersLoseNothingUncounted) {
  SampleRing ring(64, 8);
  constexpr int kThreads = 4, kPerThread = 20000;
  std::atomic<bool> go{false};
  std::atomic<int> done{0};
  std::vector<std::thread> producers;
  for (int t = 0; t < kThreads; t++) {
    producers.emplace_back([&, t] {
      while (!go.load()) {
      }
      for (int i = 0; i < kPerThread; i++) Push(ring, t, static_cast<uint64_t>(t) << 32 | static_cast<uint64_t>(i) << 4, 8);
      done++;
    });
  }
  go.store(true);
  uint64_t consumed = 0;
  std::vector<int> last(kThreads, -1);
  bool whole = true, ordered = true;
  auto consume = [&](const SampleHeader& h, const uint64_t* frames, const int32_t*) {
    consumed++;
    for (int i = 1; i < 8; i++) whole &= frames[i] == frames[0] + 8 * i;
    int seq = static_cast<int>((frames[0] & 0xffffffffu) >> 4);
    ordered &= seq > last[h.thread_id];
    last[h.thread_id] = seq;
  };
  while (done.load() < kThreads) ring.Drain(consume);
  for (auto& p : producers) p.join();
  ring.Drain(consume);
  EXPECT_TRUE(whole);
  EXPECT_TRUE(ordered);
  EXPECT_EQ(consumed + ring.dropped(), static_cast<uint64_t>(kThreads) * kPerThread);
  EXPECT_EQ(ring.written(), consumed);
}

TEST(CpuAggregateTest, SumsPerStackThreadAndStateAndPerThreadState) {
  SampleRing ring(16, 4);
  Push(ring, 1, 0x100, 3, 10, 10);
  Push(ring, 1, 0x100, 3, 5, 7);
  Push(ring, 2, 0x100, 3, 0, 30, ThreadState::kBlocked);
  Push(ring, 1, 0x200, 2, 1, 1, ThreadState::kGc);
  CpuAggregate agg;
  ring.Drain([&](const SampleHeader& h, const uint64_t* f, const int32_t* l) { agg.Add(h, f, l); });
  EXPECT_EQ(agg.size(), 3u);
  EXPECT_EQ(agg.stacks().stack_count(), 2u);
  CpuValues t = agg.total();
  EXPECT_EQ(t.samples, 4);
  EXPECT_EQ(t.cpu_ns, 16);
  EXPECT_EQ(t.wall_ns, 48);
  const auto& threads = agg.threads();
  ASSERT_EQ(threads.size(), 2u);
  EXPECT_EQ(threads.at(1)[static_cast<int>(ThreadState::kRunning)].cpu_ns, 15);
  EXPECT_EQ(threads.at(1)[static_cast<int>(ThreadState::kGc)].samples, 1);
  EXPECT_EQ(threads.at(2)[static_cast<int>(ThreadState::kBlocked)].wall_ns, 30);
  agg.Clear();
  EXPECT_EQ(agg.size(), 0u);
  agg.ForgetThreads();  // each thread's previous stack outlives a window (cpu_aggregate_test.cc)
  EXPECT_EQ(agg.stacks().stack_count(), 0u);
  EXPECT_EQ(agg.stacks().frame_count(), 0u);
}

TEST(CpuAggregateTest, BlockedSampleWithCpuIsSplitIntoRunningWithoutGvlAndBlocked) {
  SampleHeader h;
  h.state = ThreadState::kBlocked;
  h.cpu_delta_ns = 6;
  h.wall_delta_ns = 10;
  AccountedPart parts[2];
  // Wall mode: 6 of 10 on a CPU without the GVL, 4 blocked; the sample is
  // counted where most of its time went.
  ASSERT_EQ(AccountedParts(h, CpuMode::kWall, parts), 2);
  EXPECT_EQ(parts[0].state, ThreadState::kNoGvl);
  EXPECT_EQ(parts[0].values.cpu_ns, 6);
  EXPECT_EQ(parts[0].values.wall_ns, 6);
  EXPECT_EQ(parts[0].values.samples, 1);
  EXPECT_EQ(parts[1].state, ThreadState::kBlocked);
  EXPECT_EQ(parts[1].values.cpu_ns, 0);
  EXPECT_EQ(parts[1].values.wall_ns, 4);
  EXPECT_EQ(parts[1].values.samples, 0);
  EXPECT_EQ(TimelineState(h, CpuMode::kWall), ThreadState::kNoGvl);
  EXPECT_STREQ(ThreadStateName(ThreadState::kNoGvl), "running");
  // 3 of 10 on a CPU (a thread in C without the GVL beside a CPU hog): pprof
  // counts the sample blocked, the timeline shows it running without the
  // GVL, the graph's height being its CPU delta.
  h.cpu_delta_ns = 3;
  ASSERT_EQ(AccountedParts(h, CpuMode::kWall, parts), 2);
  EXPECT_EQ(parts[0].values.samples, 0);
  EXPECT_EQ(parts[1].values.samples, 1);
  EXPECT_EQ(TimelineState(h, CpuMode::kWall), ThreadState::kNoGvl);
  // A sleeper's crumbs (its own wake-ups, our handler) stay blocked in wall mode...
  h.cpu_delta_ns = 0;
  h.wall_delta_ns = 10000;
  h.cpu_delta_ns = 30;
  ASSERT_EQ(AccountedParts(h, CpuMode::kWall, parts), 1);
  EXPECT_EQ(parts[0].state, ThreadState::kBlocked);
  EXPECT_EQ(parts[0].values.cpu_ns, 30);
  EXPECT_EQ(TimelineState(h, CpuMode::kWall), ThreadState::kBlocked);
  // A sleeper's one sample over its whole sleep, with its start-up's 2 ms of
  // CPU: pprof splits it (the floor), the timeline draws it blocked.
  h.wall_delta_ns = 300000000;
  h.cpu_delta_ns = 2000000;
  ASSERT_EQ(AccountedParts(h, CpuMode::kWall, parts), 2);
  EXPECT_EQ(parts[0].state, ThreadState::kNoGvl);
  EXPECT_EQ(parts[0].values.cpu_ns, 2000000);
  EXPECT_EQ(parts[1].values.samples, 1);
  EXPECT_EQ(TimelineState(h, CpuMode::kWall), ThreadState::kBlocked);
  // ...but in CPU mode the timer fired because the thread was on a CPU.
  h.cpu_delta_ns = 10;
  h.wall_delta_ns = 150;
  ASSERT_EQ(AccountedParts(h, CpuMode::kCpu, parts), 2);
  EXPECT_EQ(parts[0].state, ThreadState::kNoGvl);
  EXPECT_EQ(parts[0].values.samples, 1);
  EXPECT_EQ(TimelineState(h, CpuMode::kCpu), ThreadState::kNoGvl);
  // Running samples are never split.
  h.state = ThreadState::kRunning;
  ASSERT_EQ(AccountedParts(h, CpuMode::kWall, parts), 1);
  EXPECT_EQ(parts[0].state, ThreadState::kRunning);
}

// Wall mode, a thread in C without the GVL on an overloaded machine: 3 of
// 100 on a CPU, and no voluntary context switch since its previous sample.
// It waited for a CPU, not for anything else: all of it is running without
// the GVL. The same share after a voluntary switch (a sleeper's crumbs, or
// C code that also waits on I/O) keeps the 10% rule.
TEST(CpuAggregateTest, BlockedSampleThatStayedRunnableIsRunningWithoutGvl) {
  SampleHeader h;
  h.state = ThreadState::kBlocked;
  h.cpu_delta_ns = 3;
  h.wall_delta_ns = 100;
  h.stayed_runnable = true;
  AccountedPart parts[2];
  ASSERT_EQ(AccountedParts(h, CpuMode::kWall, parts), 1);
  EXPECT_EQ(parts[0].state, ThreadState::kNoGvl);
  EXPECT_EQ(parts[0].values.cpu_ns, 3);
  EXPECT_EQ(parts[0].values.wall_ns, 100);
  EXPECT_EQ(parts[0].values.samples, 1);
  EXPECT_EQ(TimelineState(h, CpuMode::kWall), ThreadState::kNoGvl);
  // No CPU at all: nothing says it ran (a thread stopped by a debugger).
  h.cpu_delta_ns = 0;
  ASSERT_EQ(AccountedParts(h, CpuMode::kWall, parts), 1);
  EXPECT_EQ(parts[0].state, ThreadState::kBlocked);
  // It switched voluntarily: below a tenth, blocked whole.
  h.cpu_delta_ns = 3;
  h.stayed_runnable = false;
  ASSERT_EQ(AccountedParts(h, CpuMode::kWall, parts), 1);
  EXPECT_EQ(parts[0].state, ThreadState::kBlocked);
  EXPECT_EQ(parts[0].values.cpu_ns, 3);
}

// Wall mode, one sample over a whole blocking region (3.2+ masks SIGPROF
// outside Ruby code): 0.5 s of CPU in 6 s is 8%, under a tenth, but far
// above a wake-up's crumbs: split, not blocked whole.
TEST(CpuAggregateTest, LongBlockedSampleWithRealCpuIsSplit) {
  SampleHeader h;
  h.state = ThreadState::kBlocked;
  h.cpu_delta_ns = 500000000;
  h.wall_delta_ns = 6000000000;
  AccountedPart parts[2];
  ASSERT_EQ(AccountedParts(h, CpuMode::kWall, parts), 2);
  EXPECT_EQ(parts[0].state, ThreadState::kNoGvl);
  EXPECT_EQ(parts[0].values.cpu_ns, 500000000);
  EXPECT_EQ(parts[1].state, ThreadState::kBlocked);
  EXPECT_EQ(parts[1].values.wall_ns, 5500000000);
  // A tenth of a millisecond in a 10 ms sample: a sleeper's wake-up.
  h.cpu_delta_ns = 100000;
  h.wall_delta_ns = 10000000;
  ASSERT_EQ(AccountedParts(h, CpuMode::kWall, parts), 1);
  EXPECT_EQ(parts[0].state, ThreadState::kBlocked);
}

CpuProfileData SampleData() {
  CpuProfileData d;
  d.mode = CpuMode::kWall;
  d.interval_ns = 10000000;
  d.start_realtime_ns = 1700000000000000000;
  d.duration_ns = 2000000000;
  d.state_source = "thread-events";
  d.symbols = {{"Object#burn_a", "/app/burn.rb", 3, true}, {"<main>", "/app/burn.rb", 1, true},
               {"Kernel#sleep", "", 0, true}};
  CpuProfileData::Row a;
  a.stack = {{0, 4}, {1, 9}};
  a.thread_id = 101;
  a.state = ThreadState::kRunning;
  a.values = {3, 30000000, 31000000};
  CpuProfileData::Row s;
  s.stack = {{2, 0}, {1, 12}};
  s.thread_id = 102;
  s.state = ThreadState::kBlocked;
  s.truncated = true;
  s.values = {2, 0, 20000000};
  CpuProfileData::Row gc;  // taken while a GC ran: no stack walked
  gc.thread_id = 101;
  gc.state = ThreadState::kGc;
  gc.values = {1, 5000000, 5000000};
  d.rows = {a, s, gc};
  d.thread_names = {{101, "burner"}, {102, "sleeper"}};
  return d;
}

TEST(CpuProfileTest, EncodedProfileReadsBackInGoPprof) {
  FATHOM_REQUIRE_TOOL("go");
  std::string gz = EncodeCpuPprof(SampleData());
  test_util::TempDir dir;
  std::string path = dir.path() + "/cpu.pb.gz";
  test_util::WriteFile(path, gz);
  std::string env = "HOME=" + dir.path() + " GOCACHE=" + dir.path() + "/cache ";
  auto raw = test_util::RunCommand(env + "go tool pprof -raw -symbolize=none " + path);
  ASSERT_EQ(raw.exit_code, 0) << raw.output;
  EXPECT_NE(raw.output.find("samples/count cpu/nanoseconds wall/nanoseconds[dflt]"), std::string::npos) << raw.output;
  EXPECT_NE(raw.output.find("thread name:[burner]"), std::string::npos) << raw.output;
  EXPECT_NE(raw.output.find("state:[blocked]"), std::string::npos) << raw.output;
  EXPECT_NE(raw.output.find("thread id:[101]"), std::string::npos) << raw.output;
  EXPECT_NE(raw.output.find("Object#burn_a /app/burn.rb:4"), std::string::npos) << raw.output;
  EXPECT_NE(raw.output.find("(truncated)"), std::string::npos) << raw.output;
  EXPECT_NE(raw.output.find("fathom.cpu.mode=wall"), std::string::npos) << raw.output;
  EXPECT_NE(raw.output.find("Garbage Collection"), std::string::npos) << raw.output;
  EXPECT_NE(raw.output.find("state:[gc]"), std::string::npos) << raw.output;
  auto top = test_util::RunCommand(env + "go tool pprof -top -symbolize=none -sample_index=cpu " + path);
  ASSERT_EQ(top.exit_code, 0) << top.output;
  EXPECT_NE(top.output.find("Object#burn_a"), std::string::npos) << top.output;
}

TEST(CpuProfileTest, FirefoxTimelineHasATrackPerThreadAndStateMarkers) {
  CpuProfileData d = SampleData();
  d.pid = 101;
  d.start_monotonic_ns = 1000000000;
  d.timeline_stacks = {{{{0, 4}, {1, 9}}}, {{{2, 0}, {1, 12}}}};
  d.timeline = {
      {1010000000, 101, 0, ThreadState::kRunning, 10000000, 10000000},
      {1020000000, 101, 0, ThreadState::kGvlWait, 0, 10000000},
      {1030000000, 101, 0, ThreadState::kGvlWait, 0, 10000000},
      {1040000000, 101, 0, ThreadState::kRunning, 10000000, 10000000},
      {1015000000, 102, 1, ThreadState::kBlocked, 0, 15000000},
      {1045000000, 102, UINT32_MAX, ThreadState::kGc, 1000000, 30000000},
  };
  std::string text = EncodeCpuFirefox(d, false);
  test_util::json::Value v = test_util::json::Parse(text);
  EXPECT_EQ(test_util::FirefoxFormatErrors(v), "");
  EXPECT_NE(text.find("\"burner\""), std::string::npos);
  EXPECT_NE(text.find("\"sleeper\""), std::string::npos);
  EXPECT_NE(text.find("gvl-wait"), std::string::npos);
  EXPECT_NE(text.find("Object#burn_a"), std::string::npos);
  EXPECT_NE(text.find("Garbage Collection"), std::string::npos);
  EXPECT_EQ(v["threads"].as_array().size(), 2u);
}

}  // namespace
}  // namespace fathom
