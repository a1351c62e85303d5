#include "labels/label_sets.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>

namespace fathom {
namespace {

TEST(LabelSets, EmptyIsZeroAndSameSetSameId) {
  LabelSets t(8);
  EXPECT_EQ(t.Intern({}), LabelSets::kEmptyId);
  uint32_t a = t.Intern({{"endpoint", "a"}, {"job", "x"}});
  uint32_t b = t.Intern({{"job", "x"}, {"endpoint", "a"}});  // other order, same set
  EXPECT_EQ(a, b);
  EXPECT_GE(a, 2u);
  EXPECT_NE(t.Intern({{"endpoint", "b"}}), a);
  EXPECT_EQ(t.size(), 2u);
  const LabelPairs& got = t.Get(a);
  ASSERT_EQ(got.size(), 2u);
  EXPECT_EQ(got[0], (std::pair<std::string, std::string>{"endpoint", "a"}));  // sorted by key
  EXPECT_EQ(got[1], (std::pair<std::string, std::string>{"job", "x"}));
  EXPECT_TRUE(t.Get(0).empty());
  EXPECT_TRUE(t.Get(9999).empty());  // never published
}

TEST(LabelSets, LengthPrefixedKeysCannotCollide) {
  LabelSets t(8);
  EXPECT_NE(t.Intern({{"a", "b1:c"}}), t.Intern({{"a", "b"}, {"c", ""}}));
}

TEST(LabelSets, OverflowKeepsKeysThenOneSet) {
  LabelSets t(3);
  uint32_t ids[3];
  for (int i = 0; i < 3; i++) ids[i] = t.Intern({{"endpoint", "/users/" + std::to_string(i)}});
  EXPECT_EQ(t.overflowed(), 0u);
  // Full: a new set becomes its keys with value "(other)", one id for all.
  uint32_t o1 = t.Intern({{"endpoint", "/users/1000"}});
  uint32_t o2 = t.Intern({{"endpoint", "/users/1001"}});
  EXPECT_EQ(o1, o2);
  EXPECT_EQ(t.Get(o1), (LabelPairs{{"endpoint", "(other)"}}));
  EXPECT_EQ(t.overflowed(), 2u);
  // Known sets keep their ids.
  for (int i = 0; i < 3; i++) EXPECT_EQ(t.Intern({{"endpoint", "/users/" + std::to_string(i)}}), ids[i]);
  EXPECT_EQ(t.size(), 3u);
  // The reserve of "(other)" sets is bounded too.
  uint32_t last = 0;
  for (size_t i = 0; i < LabelSets::kOverflowSets + 10; i++) last = t.Intern({{"k" + std::to_string(i), "v"}});
  EXPECT_EQ(last, LabelSets::kOverflowId);
  EXPECT_EQ(t.Get(LabelSets::kOverflowId), (LabelPairs{{"fathom_labels", "(other)"}}));
}

TEST(LabelSets, ReadersSeeWholeEntriesWhileAnotherThreadInterns) {
  LabelSets t(2000);
  std::atomic<bool> done{false};
  std::thread reader([&] {
    while (!done.load()) {
      for (uint32_t id = 2; id < 2002; id++) {
        const LabelPairs& p = t.Get(id);
        if (!p.empty()) {
          ASSERT_EQ(p.size(), 1u);
          ASSERT_EQ(p[0].first, "endpoint");
        }
      }
    }
  });
  std::vector<uint32_t> ids;
  for (int i = 0; i < 2000; i++) ids.push_back(t.Intern({{"endpoint", std::to_string(i)}}));
  done = true;
  reader.join();
  for (int i = 0; i < 2000; i++) EXPECT_EQ(t.Get(ids[i])[0].second, std::to_string(i));  // ids stable
}

TEST(LabelSets, SpanIdHex) {
  EXPECT_EQ(SpanIdHex(0x1234abcd), "000000001234abcd");
  EXPECT_EQ(SpanIdHex(~0ULL), "ffffffffffffffff");
}

}  // namespace
}  // namespace fathom
