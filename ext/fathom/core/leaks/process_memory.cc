#include "leaks/process_memory.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>

#if defined(__GLIBC__) && (__GLIBC__ > 2 || (__GLIBC__ == 2 && __GLIBC_MINOR__ >= 33))
#include <malloc.h>
#define FATHOM_HAVE_MALLINFO2 1
#endif

namespace fathom {
namespace leaks {

int64_t ReadRssBytes(const char* statm_path, int64_t page_size) {
  int fd = open(statm_path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return -1;
  char buf[256];
  ssize_t n;
  do {
    n = read(fd, buf, sizeof buf - 1);
  } while (n < 0 && errno == EINTR);
  close(fd);
  if (n <= 0) return -1;
  buf[n] = '\0';
  // "size resident shared text lib data dt", in pages.
  char* end = nullptr;
  strtoull(buf, &end, 10);
  if (end == buf) return -1;
  char* start = end;
  unsigned long long resident = strtoull(start, &end, 10);
  if (end == start || page_size <= 0) return -1;
  return static_cast<int64_t>(resident) * page_size;
}

ProcessMemory ReadProcessMemory() {
  ProcessMemory m;
  m.rss_bytes = ReadRssBytes("/proc/self/statm", sysconf(_SC_PAGESIZE));
#if defined(FATHOM_HAVE_MALLINFO2)
  struct mallinfo2 info = mallinfo2();
  m.malloc_known = true;
  m.malloc_arena_bytes = info.arena;
  m.malloc_in_use_bytes = info.uordblks + info.hblkhd;
  m.malloc_free_bytes = info.fordblks;
  m.malloc_mmap_bytes = info.hblkhd;
#endif
  return m;
}

}  // namespace leaks
}  // namespace fathom
