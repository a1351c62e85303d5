#include "heap/stack_table.h"

#include <gtest/gtest.h>

#include <algorithm>

namespace fathom {
namespace {

TEST(StackTableTest, InternsIdenticalStacksOnce) {
  StackTable t;
  uint64_t h[] = {0x100, 0x200, 0x300};
  int32_t l[] = {10, 20, 30};
  uint32_t a = t.Intern(h, l, 3, false);
  uint32_t b = t.Intern(h, l, 3, false);
  EXPECT_EQ(a, b);
  EXPECT_EQ(t.stack_count(), 1u);
  EXPECT_EQ(t.frame_count(), 3u);

  int32_t other_lines[] = {11, 20, 30};
  EXPECT_NE(t.Intern(h, other_lines, 3, false), a);  // same frames, other line
  EXPECT_NE(t.Intern(h, l, 2, false), a);             // prefix
  EXPECT_NE(t.Intern(h, l, 3, true), a);              // truncated differs
  EXPECT_EQ(t.stack_count(), 4u);
  EXPECT_EQ(t.frame_count(), 3u);  // frames shared
}

TEST(StackTableTest, RefcountsDropStacksAndFrames) {
  StackTable t;
  uint64_t h1[] = {0x100, 0x200};
  uint64_t h2[] = {0x100, 0x300};
  int32_t l[] = {1, 2};
  uint32_t s1 = t.Intern(h1, l, 2, false);
  uint32_t s2 = t.Intern(h2, l, 2, false);
  t.Retain(s1);
  t.Release(s1);
  EXPECT_EQ(t.stack_count(), 2u);
  t.Release(s1);
  EXPECT_EQ(t.stack_count(), 1u);
  EXPECT_EQ(t.frame_count(), 2u);  // 0x200 gone, 0x100 still used by s2
  std::vector<uint64_t> marked;
  t.ForEachFrameHandle([&](uint64_t handle) { marked.push_back(handle); });
  std::sort(marked.begin(), marked.end());
  EXPECT_EQ(marked, (std::vector<uint64_t>{0x100, 0x300}));
  t.Release(s2);
  EXPECT_EQ(t.stack_count(), 0u);
  EXPECT_EQ(t.frame_count(), 0u);
  // Slots are recycled and the index still finds new stacks.
  uint32_t s3 = t.Intern(h1, l, 2, false);
  EXPECT_EQ(t.Intern(h1, l, 2, false), s3);
}

TEST(StackTableTest, SymbolsCachedPerFrameAndResetWhenFrameDies) {
  StackTable t;
  uint64_t h[] = {0x100};
  int32_t l[] = {5};
  uint32_t s = t.Intern(h, l, 1, false);
  uint32_t f = t.frames(s)[0];
  t.SetSymbol(f, FrameSymbol{"Foo#bar", "foo.rb", 3, true});
  EXPECT_EQ(t.symbol(f).name, "Foo#bar");
  t.Release(s);
  uint64_t h2[] = {0x900};
  uint32_t s2 = t.Intern(h2, l, 1, false);
  EXPECT_FALSE(t.symbol(t.frames(s2)[0]).resolved);  // recycled slot starts unresolved
}

// GC compaction moves frame objects: after remapping, lookups use the new
// addresses and old ones are unknown.
TEST(StackTableTest, RemapFrameHandlesAfterCompaction) {
  StackTable t;
  uint64_t h[] = {0x100, 0x200};
  int32_t l[] = {1, 2};
  uint32_t s = t.Intern(h, l, 2, false);
  t.RemapFrameHandles([](uint64_t x) { return x == 0x100 ? 0x5100 : x; });
  uint64_t moved[] = {0x5100, 0x200};
  EXPECT_EQ(t.Intern(moved, l, 2, false), s);
  EXPECT_EQ(t.frame_handle(t.frames(s)[0]), 0x5100u);
  EXPECT_NE(t.Intern(h, l, 2, false), s);
}

TEST(StackTableTest, ManyStacksGrowBuckets) {
  StackTable t;
  std::vector<uint32_t> ids;
  for (uint64_t i = 0; i < 20000; i++) {
    uint64_t h[] = {0x1000 + i * 8, 0x10};
    int32_t l[] = {static_cast<int32_t>(i % 7), 1};
    ids.push_back(t.Intern(h, l, 2, false));
  }
  for (uint64_t i = 0; i < 20000; i++) {
    uint64_t h[] = {0x1000 + i * 8, 0x10};
    int32_t l[] = {static_cast<int32_t>(i % 7), 1};
    ASSERT_EQ(t.Intern(h, l, 2, false), ids[i]);
  }
  EXPECT_EQ(t.stack_count(), 20000u);
}

}  // namespace
}  // namespace fathom
