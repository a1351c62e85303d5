#include "base/object_map.h"

#include <gtest/gtest.h>

#include <random>
#include <unordered_map>

namespace fathom {
namespace {

TEST(ObjectMapTest, InsertFindErase) {
  ObjectMap m;
  EXPECT_EQ(m.Find(0x1000), ObjectMap::kNotFound);
  m.Insert(0x1000, 7);
  m.Insert(0x2000, 8);
  EXPECT_EQ(m.Find(0x1000), 7u);
  EXPECT_EQ(m.Find(0x2000), 8u);
  EXPECT_EQ(m.size(), 2u);
  EXPECT_EQ(m.Erase(0x1000), 7u);
  EXPECT_EQ(m.Erase(0x1000), ObjectMap::kNotFound);
  EXPECT_EQ(m.Find(0x1000), ObjectMap::kNotFound);
  EXPECT_EQ(m.Find(0x2000), 8u);
  m.Insert(0x2000, 9);  // overwrite
  EXPECT_EQ(m.Find(0x2000), 9u);
  EXPECT_EQ(m.size(), 1u);
}

// Slot reuse: an address freed and handed to a new object maps to the new record.
TEST(ObjectMapTest, ReusedKeyAfterErase) {
  ObjectMap m;
  m.Insert(0x3000, 1);
  m.Erase(0x3000);
  m.Insert(0x3000, 2);
  EXPECT_EQ(m.Find(0x3000), 2u);
  EXPECT_EQ(m.size(), 1u);
}

TEST(ObjectMapTest, MatchesReferenceUnderRandomChurn) {
  ObjectMap m;
  std::unordered_map<uint64_t, uint32_t> ref;
  std::mt19937_64 rng(42);
  for (int i = 0; i < 200000; i++) {
    uint64_t key = (rng() % 5000 + 1) * 40;  // aligned, never 0 or 1
    if (rng() % 3 == 0) {
      auto it = ref.find(key);
      uint32_t expected = it == ref.end() ? ObjectMap::kNotFound : it->second;
      ASSERT_EQ(m.Erase(key), expected);
      ref.erase(key);
    } else {
      uint32_t v = static_cast<uint32_t>(rng());
      m.Insert(key, v);
      ref[key] = v;
    }
  }
  ASSERT_EQ(m.size(), ref.size());
  for (auto& [k, v] : ref) ASSERT_EQ(m.Find(k), v);
  // Keys never inserted, or erased, are absent.
  for (uint64_t key = 40; key <= 5000 * 40; key += 40) {
    if (ref.find(key) == ref.end()) {
      ASSERT_EQ(m.Find(key), ObjectMap::kNotFound);
    }
  }
}

}  // namespace
}  // namespace fathom
