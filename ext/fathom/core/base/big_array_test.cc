#include "base/big_array.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>

namespace fathom {
namespace {

TEST(BigArray, GrowsKeepingValuesAndShrinks) {
  BigArray<uint64_t> a;
  EXPECT_EQ(a.MemoryBytes(), 0u);
  for (uint64_t i = 0; i < 300000; i++) a.push_back(i * 3);
  ASSERT_EQ(a.size(), 300000u);
  for (uint64_t i = 0; i < a.size(); i += 997) ASSERT_EQ(a[i], i * 3);
  EXPECT_GE(a.MemoryBytes(), 300000u * 8);
  a.resize(10);
  a.shrink_to_fit();
  EXPECT_EQ(a[9], 27u);
  a.resize(20);  // new elements are zero
  EXPECT_EQ(a[15], 0u);
  BigArray<uint64_t> b = std::move(a);
  EXPECT_EQ(a.size(), 0u);
  EXPECT_EQ(b.size(), 20u);
  b.Free();
  EXPECT_EQ(b.size(), 0u);
}

// 8-byte values rewritten in place as 4-byte ones, as BuildDumpGraph does
// with the references.
TEST(BigArray, RecastReusesTheMemory) {
  BigArray<uint64_t> a;
  for (uint64_t i = 0; i < 100000; i++) a.push_back(i << 32);
  char* bytes = reinterpret_cast<char*>(a.data());
  for (size_t i = 0; i < a.size(); i++) {
    uint64_t v;
    std::memcpy(&v, bytes + 8 * i, 8);
    uint32_t w = static_cast<uint32_t>(v >> 32);
    std::memcpy(bytes + 4 * i, &w, 4);
  }
  size_t n = a.size();
  BigArray<uint32_t> b = std::move(a).Recast<uint32_t>(n);
  ASSERT_EQ(b.size(), n);
  for (uint32_t i = 0; i < n; i += 101) ASSERT_EQ(b[i], i);
  EXPECT_LE(b.MemoryBytes(), n * 4 + 4096);
  b.push_back(7);
  EXPECT_EQ(b.back(), 7u);
}

}  // namespace
}  // namespace fathom
