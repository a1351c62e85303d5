// BigArray<T>: a growable array of trivially copyable values for the
// multi-hundred-MB arrays of heap-dump analysis, whose final size is not
// known while a file streams in.
//
// Why not std::vector: growing a vector copies it into a new block, so for
// a moment the old and the new block are both resident (2.5x the data at
// 1.5x growth), and that moment is the process's peak. Here, on Linux, the
// memory is an anonymous mapping grown with mremap: the kernel moves page
// table entries, never the data, so growth costs no transient copy, and
// pages beyond size() are never touched, so capacity costs address space,
// not resident memory. Freeing unmaps at once (glibc keeps freed heap
// blocks below its mmap threshold, up to 32 MB, in the process).
// Elsewhere, and under AddressSanitizer (which must see the block to catch
// overflows), it falls back to realloc.
//
// Not thread-safe; new elements from push_back/resize are value-initialized
// only where the caller writes them (resize zero-fills).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <new>
#include <type_traits>
#include <utility>

#if defined(__linux__) && !defined(__SANITIZE_ADDRESS__)
#include <sys/mman.h>
#define FATHOM_BIG_ARRAY_MREMAP 1
#endif

namespace fathom {

template <typename T>
class BigArray {
  static_assert(std::is_trivially_copyable<T>::value, "BigArray holds plain values");

 public:
  BigArray() = default;
  ~BigArray() { Free(); }
  BigArray(const BigArray&) = delete;
  BigArray& operator=(const BigArray&) = delete;
  BigArray(BigArray&& o) noexcept { Take(o); }
  BigArray& operator=(BigArray&& o) noexcept {
    if (this != &o) {
      Free();
      Take(o);
    }
    return *this;
  }

  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  T* data() { return data_; }
  const T* data() const { return data_; }
  T& operator[](size_t i) { return data_[i]; }
  const T& operator[](size_t i) const { return data_[i]; }
  T& back() { return data_[size_ - 1]; }
  const T* begin() const { return data_; }
  const T* end() const { return data_ + size_; }

  void push_back(T v) {
    if (size_ == capacity_) Reserve(size_ + 1);
    data_[size_++] = v;
  }
  // New elements are zero.
  void resize(size_t n) {
    if (n > capacity_) Reserve(n);
    if (n > size_) std::memset(static_cast<void*>(data_ + size_), 0, (n - size_) * sizeof(T));
    size_ = n;
  }
  void assign(size_t n, T v) {
    size_ = 0;
    if (n > capacity_) Reserve(n);
    for (size_t i = 0; i < n; i++) data_[i] = v;
    size_ = n;
  }
  // Room for at least n elements (doubling, so push_back is amortized O(1)).
  void Reserve(size_t n) {
    if (n <= capacity_) return;
    size_t want = capacity_ * 2;
    if (want < n) want = n;
    size_t min = kPage / sizeof(T);
    if (want < min) want = min;
    Resize(want);
  }
  // Gives back the capacity beyond size() (no copy with mremap).
  void shrink_to_fit() {
    if (size_ == 0) Free();
    else if (Bytes(size_) < Bytes(capacity_)) Resize(size_);
  }
  void Free() {
    if (data_ == nullptr) return;
#ifdef FATHOM_BIG_ARRAY_MREMAP
    munmap(data_, Bytes(capacity_));
#else
    std::free(data_);
#endif
    data_ = nullptr;
    size_ = capacity_ = 0;
  }
  // Bytes in use (whole pages): what is resident. Capacity beyond it is
  // address space only (see above).
  size_t MemoryBytes() const { return size_ ? Bytes(size_) : 0; }

  // Reuses this array's memory for `n` values of another type that fit in
  // it, e.g. 8-byte addresses rewritten in place as 4-byte indices; the
  // bytes are kept as they are and the rest is given back.
  template <typename U>
  BigArray<U> Recast(size_t n) && {
    static_assert(std::is_trivially_copyable<U>::value, "BigArray holds plain values");
    BigArray<U> out;
    if (n * sizeof(U) > capacity_ * sizeof(T)) throw std::bad_alloc();
    out.data_ = reinterpret_cast<U*>(data_);
    out.capacity_ = capacity_ * sizeof(T) / sizeof(U);
    out.size_ = n;
    data_ = nullptr;
    size_ = capacity_ = 0;
    out.shrink_to_fit();
    return out;
  }

 private:
  template <typename U>
  friend class BigArray;
  static constexpr size_t kPage = 4096;

  static size_t Bytes(size_t n) { return (n * sizeof(T) + kPage - 1) / kPage * kPage; }

  void Resize(size_t n) {
    size_t old_bytes = data_ ? Bytes(capacity_) : 0, new_bytes = Bytes(n);
    void* p;
#ifdef FATHOM_BIG_ARRAY_MREMAP
    p = data_ ? mremap(data_, old_bytes, new_bytes, MREMAP_MAYMOVE)
              : mmap(nullptr, new_bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
#else
    (void)old_bytes;
    p = std::realloc(data_, new_bytes);
    if (p == nullptr) throw std::bad_alloc();
#endif
    data_ = static_cast<T*>(p);
    capacity_ = new_bytes / sizeof(T);
    if (size_ > capacity_) size_ = capacity_;
  }

  void Take(BigArray& o) {
    data_ = o.data_;
    size_ = o.size_;
    capacity_ = o.capacity_;
    o.data_ = nullptr;
    o.size_ = o.capacity_ = 0;
  }

  T* data_ = nullptr;
  size_t size_ = 0;
  size_t capacity_ = 0;
};

}  // namespace fathom
