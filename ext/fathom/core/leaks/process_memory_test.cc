#include "leaks/process_memory.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace fathom {
namespace leaks {
namespace {

std::string TempFile(const char* contents) {
  char path[] = "/tmp/fathom-statm-XXXXXX";
  int fd = mkstemp(path);
  EXPECT_GE(fd, 0);
  EXPECT_EQ(write(fd, contents, strlen(contents)), static_cast<ssize_t>(strlen(contents)));
  close(fd);
  return path;
}

TEST(ProcessMemoryTest, ReadsTheResidentFieldOfStatm) {
  std::string path = TempFile("12345 678 90 1 0 2000 0\n");
  EXPECT_EQ(ReadRssBytes(path.c_str(), 4096), 678 * 4096);
  unlink(path.c_str());
}

TEST(ProcessMemoryTest, UnreadableOrGarbageIsUnknown) {
  EXPECT_EQ(ReadRssBytes("/nonexistent/statm", 4096), -1);
  std::string path = TempFile("not numbers");
  EXPECT_EQ(ReadRssBytes(path.c_str(), 4096), -1);
  unlink(path.c_str());
  std::string one = TempFile("12345");
  EXPECT_EQ(ReadRssBytes(one.c_str(), 4096), -1);
  unlink(one.c_str());
}

#if defined(__SANITIZE_ADDRESS__)
constexpr bool kSanitizedMalloc = true;
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
constexpr bool kSanitizedMalloc = true;
#else
constexpr bool kSanitizedMalloc = false;
#endif
#else
constexpr bool kSanitizedMalloc = false;
#endif

// Memory malloc'd and touched shows in malloc's in-use bytes and in RSS;
// freeing it takes it out of in-use.
TEST(ProcessMemoryTest, MallocGrowthIsSeen) {
  ProcessMemory before = ReadProcessMemory();
  ASSERT_GT(before.rss_bytes, 0);
  std::vector<char*> blocks;
  for (int i = 0; i < 64; i++) {
    char* p = static_cast<char*>(malloc(64 << 10));  // below the mmap threshold: from an arena
    memset(p, i + 1, 64 << 10);
    blocks.push_back(p);
  }
  ProcessMemory during = ReadProcessMemory();
  EXPECT_GE(during.rss_bytes, before.rss_bytes);
  if (kSanitizedMalloc) {
    // AddressSanitizer replaces malloc, and its mallinfo2 reports zeros:
    // glibc's figures are not there to check (rake test:core builds so).
    for (char* p : blocks) free(p);
    GTEST_SKIP() << "mallinfo2 under AddressSanitizer reports nothing";
  }
  if (during.malloc_known) {
    EXPECT_GE(during.malloc_in_use_bytes, before.malloc_in_use_bytes + 60 * (64 << 10));
    EXPECT_GE(during.malloc_arena_bytes, during.malloc_in_use_bytes - during.malloc_mmap_bytes);
  }
  for (char* p : blocks) free(p);
  ProcessMemory after = ReadProcessMemory();
  if (after.malloc_known) {
    EXPECT_LT(after.malloc_in_use_bytes, during.malloc_in_use_bytes - 60 * (64 << 10));
  }
}

}  // namespace
}  // namespace leaks
}  // namespace fathom
