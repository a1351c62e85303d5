// Request labels through the CPU/wall and heap paths: the aggregate keeps
// samples of different label sets and span ids apart, and both encoders
// write them as pprof string labels that go tool pprof reads back.
#include <gtest/gtest.h>

#include <string>

#include "cpu/cpu_aggregate.h"
#include "cpu/cpu_profile.h"
#include "heap/heap_aggregate.h"
#include "heap/heap_encode.h"
#include "heap/heap_rows.h"
#include "labels/label_sets.h"
#include "testing/external_tools.h"

namespace fathom {
namespace {

std::string RawPprof(const std::string& gz) {
  test_util::TempDir dir;
  std::string path = dir.path() + "/p.pb.gz";
  test_util::WriteFile(path, gz);
  std::string env = "HOME=" + dir.path() + " GOCACHE=" + dir.path() + "/cache ";
  auto raw = test_util::RunCommand(env + "go tool pprof -raw -symbolize=none " + path);
  EXPECT_EQ(raw.exit_code, 0) << raw.output;
  return raw.output;
}

TEST(LabelledProfiles, CpuAggregateKeepsLabelSetsAndSpansApart) {
  CpuAggregate agg;
  uint64_t frames[] = {0x10, 0x20};
  int32_t lines[] = {1, 2};
  auto add = [&](uint32_t set, uint64_t span) {
    SampleHeader h;
    h.thread_id = 7;
    h.depth = 2;
    h.cpu_delta_ns = 1000;
    h.wall_delta_ns = 1000;
    h.state = ThreadState::kRunning;
    h.labels.label_set = set;
    h.labels.span_id = span;
    agg.Add(h, frames, lines);
  };
  add(0, 0);
  add(2, 0);
  add(2, 0);
  add(2, 0xabc);
  add(3, 0);
  std::vector<std::pair<CpuKey, CpuValues>> rows;
  agg.ForEach([&](const CpuKey& k, const CpuValues& v) { rows.push_back({k, v}); });
  ASSERT_EQ(rows.size(), 4u);
  EXPECT_EQ(rows[1].first.labels.label_set, 2u);
  EXPECT_EQ(rows[1].second.cpu_ns, 2000);
  EXPECT_EQ(rows[2].first.labels.span_id, 0xabcu);
  EXPECT_EQ(rows[3].first.labels.label_set, 3u);
  agg.Clear();
}

TEST(LabelledProfiles, CpuPprofCarriesLabelsAndSpanId) {
  FATHOM_REQUIRE_TOOL("go");
  LabelSets sets(4);
  uint32_t show = sets.Intern({{"endpoint", "UsersController#show"}, {"job", "none"}});
  CpuProfileData d;
  d.mode = CpuMode::kCpu;
  d.interval_ns = 1000000;
  d.state_source = "thread-events";
  d.symbols = {{"Object#burn", "/app/burn.rb", 3, true}};
  d.label_sets = &sets;
  CpuProfileData::Row a;
  a.stack = {{0, 4}};
  a.thread_id = 1;
  a.state = ThreadState::kRunning;
  a.values = {3, 3000000, 3000000};
  a.labels.label_set = show;
  a.labels.span_id = 0x1234abcd;
  CpuProfileData::Row b = a;
  b.labels.label_set = 0;
  b.labels.span_id = 0;
  b.values = {1, 1000000, 1000000};
  d.rows = {a, b};
  std::string raw = RawPprof(EncodeCpuPprof(d));
  EXPECT_NE(raw.find("endpoint:[UsersController#show]"), std::string::npos) << raw;
  EXPECT_NE(raw.find("job:[none]"), std::string::npos) << raw;
  EXPECT_NE(raw.find("span_id:[000000001234abcd]"), std::string::npos) << raw;
  // The unlabelled row has neither.
  size_t first = raw.find("endpoint:[");
  EXPECT_EQ(raw.find("endpoint:[", first + 1), std::string::npos) << raw;
}

TEST(LabelledProfiles, HeapPprofCarriesTheAllocatingThreadsLabels) {
  FATHOM_REQUIRE_TOOL("go");
  LabelSets sets(4);
  uint32_t a = sets.Intern({{"endpoint", "a"}});
  SampleStore store;
  store.set_exact(true);
  uint64_t handles[] = {0x100};
  int32_t lines[] = {5};
  uint32_t stack = store.stacks().Intern(handles, lines, 1, false);
  store.stacks().SetSymbol(store.stacks().frames(stack)[0], FrameSymbol{"Object#alloc", "app.rb", 1, true});
  uint32_t cls = store.labels().Intern("String");
  HeapAggregator agg(store.stacks());
  for (uint32_t set : {a, 0u}) {
    store.stacks().Retain(stack);
    SampleRecord r;
    r.object = 0x5000 + set;
    r.stack_id = stack;
    r.weight = 2;
    r.label_set = set;
    uint32_t i = store.AddPending(r);
    store.Commit(i, CommitInfo{cls, 0, 40, 0});
    store.ClearPending();
    store.Report(i, /*alive=*/true, 40, &agg);
  }
  HeapProfileRowsBuilder builder(store, agg);
  ASSERT_TRUE(builder.Step(SIZE_MAX));
  HeapProfileRows rows = builder.Take();
  ASSERT_EQ(rows.rows.size(), 2u);  // the same stack and class, two label sets
  rows.label_sets = &sets;
  std::string raw = RawPprof(EncodeHeapProfile(rows));
  EXPECT_NE(raw.find("endpoint:[a]"), std::string::npos) << raw;
  EXPECT_EQ(raw.find("span_id"), std::string::npos) << raw;  // never on heap samples
}

}  // namespace
}  // namespace fathom
