#include "stacks/stack_table.h"

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

// An allocation with no Ruby frame (a thread's first objects): depth 0,
// no buffers. Interned once, and compared without handing memcmp a null
// pointer (UBSan's check in the ASan build of the suite).
TEST(StackTableTest, EmptyStackInternsOnce) {
  StackTable t;
  uint32_t a = t.Intern(nullptr, nullptr, 0, false);
  EXPECT_EQ(a, t.Intern(nullptr, nullptr, 0, false));
  uint64_t h[] = {1};
  int32_t l[] = {1};
  EXPECT_NE(a, t.Intern(h, l, 1, false));
  EXPECT_EQ(a, t.Intern(nullptr, nullptr, 0, false));
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

// The recent-stack cache (keyed by the innermost frames) must prove a hit
// on the whole stack: deep stacks that agree on their innermost frames but
// differ at any outer frame or line are different stacks.
TEST(StackTableTest, DeepStacksDifferingOnlyFarFromTheLeafAreDistinct) {
  StackTable t;
  constexpr size_t kDepth = 150;
  std::vector<uint64_t> h(kDepth);
  std::vector<int32_t> l(kDepth);
  for (size_t i = 0; i < kDepth; i++) {
    h[i] = 0x10000 + i * 0x40;
    l[i] = static_cast<int32_t>(i + 1);
  }
  uint32_t a = t.Intern(h.data(), l.data(), kDepth, false);
  EXPECT_EQ(t.Intern(h.data(), l.data(), kDepth, false), a);
  EXPECT_EQ(t.cache_hits(), 1u);
  for (size_t pos : {size_t{4}, size_t{75}, kDepth - 1}) {
    std::vector<uint64_t> h2 = h;
    h2[pos] ^= 0x40;  // another frame at one outer position
    uint32_t b = t.Intern(h2.data(), l.data(), kDepth, false);
    EXPECT_NE(b, a) << pos;
    std::vector<int32_t> l2 = l;
    l2[pos] += 1;  // the same frames, another line at one outer position
    uint32_t c = t.Intern(h.data(), l2.data(), kDepth, false);
    EXPECT_NE(c, a) << pos;
    EXPECT_NE(c, b) << pos;
    // Alternating with the original still finds each one.
    EXPECT_EQ(t.Intern(h.data(), l.data(), kDepth, false), a);
    EXPECT_EQ(t.Intern(h2.data(), l.data(), kDepth, false), b);
    EXPECT_EQ(t.Intern(h.data(), l2.data(), kDepth, false), c);
  }
  EXPECT_NE(t.Intern(h.data(), l.data(), kDepth, true), a);       // truncated differs
  EXPECT_NE(t.Intern(h.data(), l.data(), kDepth - 1, false), a);  // prefix
  EXPECT_EQ(t.frames(a).size(), kDepth);
  for (size_t i = 0; i < kDepth; i++) {
    EXPECT_EQ(t.frame_handle(t.frames(a)[i]), h[i]);
    EXPECT_EQ(t.lines(a)[i], l[i]);
  }
}

// A cached stack that is dropped must not be answered again, even when its
// id is recycled for another stack with the same innermost frames.
TEST(StackTableTest, CacheForgetsDroppedStacks) {
  StackTable t;
  uint64_t h1[] = {0x100, 0x200, 0x300, 0x400, 0x500, 0x600};
  uint64_t h2[] = {0x100, 0x200, 0x300, 0x400, 0x500, 0x700};
  int32_t l[] = {1, 2, 3, 4, 5, 6};
  uint32_t s1 = t.Intern(h1, l, 6, false);
  t.Release(s1);
  EXPECT_EQ(t.stack_count(), 0u);
  uint32_t s2 = t.Intern(h2, l, 6, false);  // likely reuses s1's id and cache slot
  EXPECT_EQ(t.frame_handle(t.frames(s2)[5]), 0x700u);
  uint32_t again = t.Intern(h1, l, 6, false);
  EXPECT_NE(again, s2);
  EXPECT_EQ(t.frame_handle(t.frames(again)[5]), 0x600u);
  EXPECT_EQ(t.stack_count(), 2u);
}

// After compaction the cache must not match the old addresses.
TEST(StackTableTest, CacheFollowsRemappedHandles) {
  StackTable t;
  uint64_t h[] = {0x100, 0x200};
  int32_t l[] = {1, 2};
  uint32_t s = t.Intern(h, l, 2, false);
  EXPECT_EQ(t.Intern(h, l, 2, false), s);  // cached
  t.RemapFrameHandles([](uint64_t x) { return x == 0x200 ? 0x5200 : x; });
  uint64_t moved[] = {0x100, 0x5200};
  EXPECT_EQ(t.Intern(moved, l, 2, false), s);
  EXPECT_EQ(t.Intern(moved, l, 2, false), s);
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
