// ObjectMap: open-addressing hash map from a 64-bit object handle (a Ruby
// VALUE, opaque here) to a 32-bit index: the heap profiler's live objects
// to their records (heap/sample_store.h), the stack table's frame handles
// to their frames (stacks/stack_table.h).
//
// Why not std::unordered_map: erase() runs inside Ruby's FREEOBJ hook, i.e.
// in the middle of a GC sweep, where we promise not to allocate or free.
// Here erase only writes a tombstone; memory changes happen in Insert() (at
// commit, a postponed job, where malloc is fine), Grow() and Clear().
#pragma once

#include <cstdint>
#include <vector>

#include "base/hash_util.h"

namespace fathom {

class ObjectMap {
 public:
  static constexpr uint32_t kNotFound = UINT32_MAX;

  ObjectMap() { slots_.resize(kInitialCapacity); }

  size_t size() const { return size_; }

  void Insert(uint64_t key, uint32_t value) {
    // Linear probing stays short (~2.5 probes for a miss) at <= 50% load,
    // counting tombstones, which fill up fast under allocation churn.
    if ((size_ + tombstones_ + 1) * 2 >= slots_.size()) Grow();
    InsertNoGrow(key, value);
  }

  uint32_t Find(uint64_t key) const {
    size_t mask = slots_.size() - 1;
    for (size_t i = Mix64(key) & mask;; i = (i + 1) & mask) {
      const Slot& s = slots_[i];
      if (s.key == kEmpty) return kNotFound;
      if (s.key == key) return s.value;
    }
  }

  // Removes key if present and returns its value (kNotFound otherwise).
  // Never allocates or frees: safe inside a GC hook.
  uint32_t Erase(uint64_t key) {
    size_t mask = slots_.size() - 1;
    for (size_t i = Mix64(key) & mask;; i = (i + 1) & mask) {
      Slot& s = slots_[i];
      if (s.key == kEmpty) return kNotFound;
      if (s.key == key) {
        uint32_t v = s.value;
        s.key = kTombstone;
        --size_;
        ++tombstones_;
        return v;
      }
    }
  }

  void Clear() {
    slots_.assign(kInitialCapacity, Slot{});
    size_ = tombstones_ = 0;
  }

 private:
  // Keys 0 and 1 are never valid object handles (Ruby VALUEs of heap objects
  // are 8-byte aligned and non-zero), so they mark empty and deleted slots.
  static constexpr uint64_t kEmpty = 0;
  static constexpr uint64_t kTombstone = 1;
  static constexpr size_t kInitialCapacity = 1024;  // power of two

  struct Slot {
    uint64_t key = kEmpty;
    uint32_t value = 0;
  };

  void InsertNoGrow(uint64_t key, uint32_t value) {
    size_t mask = slots_.size() - 1;
    size_t first_tombstone = SIZE_MAX;
    for (size_t i = Mix64(key) & mask;; i = (i + 1) & mask) {
      Slot& s = slots_[i];
      if (s.key == key) {
        s.value = value;
        return;
      }
      if (s.key == kTombstone && first_tombstone == SIZE_MAX) first_tombstone = i;
      if (s.key == kEmpty) {
        Slot& dst = first_tombstone != SIZE_MAX ? slots_[first_tombstone] : s;
        if (first_tombstone != SIZE_MAX) --tombstones_;
        dst.key = key;
        dst.value = value;
        ++size_;
        return;
      }
    }
  }

  void Grow() {
    size_t capacity = slots_.size();
    // Mostly tombstones: rehash at the same size; otherwise double.
    if ((size_ + 1) * 4 >= capacity) capacity *= 2;
    std::vector<Slot> old;
    old.swap(slots_);
    slots_.assign(capacity, Slot{});
    size_ = tombstones_ = 0;
    for (const Slot& s : old)
      if (s.key != kEmpty && s.key != kTombstone) InsertNoGrow(s.key, s.value);
  }

  std::vector<Slot> slots_;
  size_t size_ = 0;
  size_t tombstones_ = 0;
};

}  // namespace fathom
