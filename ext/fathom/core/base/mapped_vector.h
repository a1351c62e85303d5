// MappedVector<T>: a std::vector whose large blocks (kMappedMinBytes and
// up) are anonymous mappings of their own, unmapped when freed; small ones
// come from operator new as usual.
//
// Why: a retention snapshot's arrays (graph, dominators, encoder tables:
// tens of bytes per object) are built by whichever thread takes the
// snapshot, e.g. any of a server's 8 threads. From glibc's malloc, two
// things kept that memory resident after the snapshot was freed
// (docs/internals/serving.md, "Memory after serving"):
//  - glibc's mmap threshold is dynamic: freeing a chunk it had mmapped
//    raises the threshold to that chunk's size (up to 32 MB) and the trim
//    threshold to twice that, so the next snapshot's arrays of that size
//    came from the thread's arena instead;
//  - the top of a thread's (non-main) arena is returned to the system only
//    when a free leaves more than the trim threshold there, never by
//    malloc_trim, so each of the 8 threads' arenas kept up to one
//    snapshot's arrays resident.
// Mapping the large blocks ourselves never shows glibc a large free, so the
// threshold stays where the application had it, and unmapping gives the
// pages back at once, from whichever thread.
//
// Under AddressSanitizer everything goes through operator new, so ASan sees
// every block (as in BigArray).
#pragma once

#include <cstddef>
#include <new>
#include <vector>

#if defined(__linux__) && !defined(__SANITIZE_ADDRESS__)
#include <sys/mman.h>
#define FATHOM_MAPPED_VECTOR_MMAP 1
#endif

namespace fathom {

// Below this, a mapping (a syscall, whole pages) costs more than it saves:
// glibc's own initial mmap threshold is 128 KiB.
constexpr size_t kMappedMinBytes = 64 * 1024;

// Whether a block of `bytes` is mapped by MappedAllocator (false on
// platforms or builds where nothing is).
inline bool MappedAllocatorMaps(size_t bytes) {
#ifdef FATHOM_MAPPED_VECTOR_MMAP
  return bytes >= kMappedMinBytes;
#else
  (void)bytes;
  return false;
#endif
}

template <typename T>
struct MappedAllocator {
  using value_type = T;

  MappedAllocator() noexcept = default;
  template <typename U>
  MappedAllocator(const MappedAllocator<U>&) noexcept {}  // NOLINT: allocators convert implicitly

  T* allocate(size_t n) {
    if (n > static_cast<size_t>(-1) / sizeof(T)) throw std::bad_array_new_length();
    size_t bytes = n * sizeof(T);
#ifdef FATHOM_MAPPED_VECTOR_MMAP
    if (MappedAllocatorMaps(bytes)) {
      void* p = mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
      if (p == MAP_FAILED) throw std::bad_alloc();
      return static_cast<T*>(p);
    }
#endif
    return static_cast<T*>(::operator new(bytes));
  }

  // n is the n given to allocate (the Allocator contract), so the same
  // size test tells how the block was made.
  void deallocate(T* p, size_t n) noexcept {
#ifdef FATHOM_MAPPED_VECTOR_MMAP
    if (MappedAllocatorMaps(n * sizeof(T))) {
      munmap(p, n * sizeof(T));
      return;
    }
#endif
    (void)n;
    ::operator delete(p);
  }
};

template <typename T, typename U>
bool operator==(const MappedAllocator<T>&, const MappedAllocator<U>&) noexcept {
  return true;
}
template <typename T, typename U>
bool operator!=(const MappedAllocator<T>&, const MappedAllocator<U>&) noexcept {
  return false;
}

template <typename T>
using MappedVector = std::vector<T, MappedAllocator<T>>;

// The bytes a vector holds (what the retention analysis reports as its
// memory), and a vector's storage given back now (clear() keeps it).
template <typename T>
size_t CapacityBytes(const MappedVector<T>& v) {
  return v.capacity() * sizeof(T);
}
template <typename T>
void ReleaseStorage(MappedVector<T>& v) {
  MappedVector<T>().swap(v);
}

}  // namespace fathom
