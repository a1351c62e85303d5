// Small hashing helpers shared by the core tables.
#pragma once

#include <cstddef>
#include <cstdint>

namespace fathom {

// A 64-bit finalizer (splitmix64's): cheap and good enough to spread the
// pointer-like values (Ruby VALUEs are 8-byte aligned) that we hash.
inline uint64_t Mix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

inline uint64_t HashCombine(uint64_t seed, uint64_t v) { return Mix64(seed ^ (v + 0x9e3779b97f4a7c15ULL + (seed << 6))); }

}  // namespace fathom
