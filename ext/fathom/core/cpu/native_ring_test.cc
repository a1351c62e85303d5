// The ring's and the aggregate's side of native: true: each cell has its
// own native PC array when asked for, and samples with the same Ruby stack
// but other C frames are kept apart.
#include <gtest/gtest.h>

#include "cpu/cpu_aggregate.h"
#include "cpu/sample_ring.h"

namespace fathom {
namespace {

void Write(SampleRing& ring, uint64_t frame, std::vector<uintptr_t> pcs) {
  SampleRing::Slot s = ring.Claim();
  ASSERT_TRUE(s);
  s.header->depth = 1;
  s.header->thread_id = 7;
  s.header->state = ThreadState::kRunning;
  s.header->cpu_delta_ns = 1000;
  s.frames[0] = frame;
  s.lines[0] = 3;
  ASSERT_NE(s.header->native, nullptr);
  ASSERT_LE(pcs.size(), ring.native_max());
  for (size_t i = 0; i < pcs.size(); i++) s.header->native[i] = pcs[i];
  s.header->native_depth = static_cast<uint16_t>(pcs.size());
  ring.Publish(s);
}

TEST(CpuNativeFrames, RingCellsCarryTheirOwnPcsAndTheAggregateKeepsThemApart) {
  SampleRing ring(8, 4, 4);
  Write(ring, 0x10, {0x1000, 0x2000});
  Write(ring, 0x10, {0x1000, 0x2000});
  Write(ring, 0x10, {0x3000});
  Write(ring, 0x10, {});
  CpuAggregate agg;
  ring.Drain([&](const SampleHeader& h, const uint64_t* f, const int32_t* l) { agg.Add(h, f, l); });
  ASSERT_EQ(agg.size(), 3u);
  std::vector<std::pair<std::vector<uintptr_t>, int64_t>> seen;
  agg.ForEach([&](const CpuKey& k, const CpuValues& v) { seen.emplace_back(agg.native(k.native_id), v.samples); });
  EXPECT_EQ(seen[0].first, (std::vector<uintptr_t>{0x1000, 0x2000}));
  EXPECT_EQ(seen[0].second, 2);
  EXPECT_EQ(seen[1].first, (std::vector<uintptr_t>{0x3000}));
  EXPECT_TRUE(seen[2].first.empty());
  agg.Clear();
  EXPECT_EQ(agg.size(), 0u);
  EXPECT_TRUE(agg.native(0).empty());
}

TEST(CpuNativeFrames, WithoutNativeTheCellsHaveNoArray) {
  SampleRing ring(4, 4);
  SampleRing::Slot s = ring.Claim();
  ASSERT_TRUE(s);
  EXPECT_EQ(s.header->native, nullptr);
  EXPECT_EQ(s.header->native_depth, 0);
  ring.Publish(s);
}

}  // namespace
}  // namespace fathom
