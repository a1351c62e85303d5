#include "base/mapped_vector.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>

namespace fathom {
namespace {

// Whether some mapping of /proc/self/maps starts at p (Linux).
bool IsOwnMapping(const void* p) {
  std::ifstream maps("/proc/self/maps");
  std::string line;
  while (std::getline(maps, line))
    if (std::stoull(line.substr(0, line.find('-')), nullptr, 16) == reinterpret_cast<uintptr_t>(p)) return true;
  return false;
}

TEST(MappedVectorTest, BehavesAsAVectorAcrossTheThreshold) {
  MappedVector<uint32_t> v;
  for (uint32_t i = 0; i < 100000; i++) v.push_back(i);  // grows from operator new into mappings
  ASSERT_EQ(v.size(), 100000u);
  for (uint32_t i = 0; i < 100000; i++) ASSERT_EQ(v[i], i);
  v.resize(10);
  v.shrink_to_fit();  // back below the threshold
  EXPECT_EQ(v, (MappedVector<uint32_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  MappedVector<uint32_t>().swap(v);
  EXPECT_EQ(v.capacity(), 0u);
}

TEST(MappedVectorTest, LargeBlocksAreMappingsOfTheirOwn) {
  MappedVector<uint64_t> small(16);
  MappedVector<uint64_t> big(kMappedMinBytes / sizeof(uint64_t));
  EXPECT_FALSE(MappedAllocatorMaps(small.capacity() * sizeof(uint64_t)));
  if (!MappedAllocatorMaps(big.capacity() * sizeof(uint64_t))) GTEST_SKIP() << "no mappings here (ASan or not Linux)";
  // Its own mapping: given back to the system by munmap when freed, never
  // a glibc chunk (whose free would raise glibc's mmap threshold).
  EXPECT_TRUE(IsOwnMapping(big.data()));
  void* where = big.data();
  MappedVector<uint64_t>().swap(big);
  EXPECT_FALSE(IsOwnMapping(where));
}

}  // namespace
}  // namespace fathom
