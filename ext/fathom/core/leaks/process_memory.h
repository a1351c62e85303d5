// The process's memory as the operating system and the C library see it,
// recorded beside each heap window so that growth outside Ruby objects can
// be told apart from a Ruby leak (docs/internals/leaks.md, "Growth outside
// Ruby objects"). Pure C++: no Ruby here (the binding adds Ruby's heap
// pages and slots from GC.stat).
#pragma once

#include <cstdint>

namespace fathom {
namespace leaks {

struct ProcessMemory {
  // Resident set size in bytes, from /proc/self/statm; -1 when unknown
  // (not Linux).
  int64_t rss_bytes = -1;
  // glibc's mallinfo2 (2.33+), summed over every arena; malloc_known is
  // false elsewhere (musl, macOS, older glibc), and the fields are 0.
  bool malloc_known = false;
  uint64_t malloc_arena_bytes = 0;   // arena: what the arenas hold from the system (not mmap'd chunks)
  uint64_t malloc_in_use_bytes = 0;  // uordblks + hblkhd: allocated, arenas and mmap'd chunks
  uint64_t malloc_free_bytes = 0;    // fordblks: free inside the arenas (fragmentation, cached)
  uint64_t malloc_mmap_bytes = 0;    // hblkhd: chunks mmap'd on their own (large allocations)
};

// Reads both. mallinfo2 takes each arena's lock in turn (microseconds to a
// millisecond with many arenas); no allocation, no signal safety.
ProcessMemory ReadProcessMemory();

// The resident pages of a statm file (its second field) times the page
// size; -1 when the file cannot be read or parsed. The path is for tests.
int64_t ReadRssBytes(const char* statm_path, int64_t page_size);

}  // namespace leaks
}  // namespace fathom
