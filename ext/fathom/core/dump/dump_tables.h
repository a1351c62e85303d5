// The two small hash tables of the heap-dump reader, both open addressing
// over dense ids with the keys in an id-indexed array (4 bytes a slot, load
// <= 0.6) and no allocation per lookup:
//   NameTable  strings (class names, file names, string prefixes) -> ids,
//              the bytes in one arena; looked up by string_view, where
//              StringInterner builds a std::string per call;
//   U64Table   64-bit keys (class addresses, (file, line) pairs) -> ids.
// Id 0 is reserved in both ("" / key 0): "none" in the DumpHeap arrays.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "base/hash_util.h"

namespace fathom {

class NameTable {
 public:
  static constexpr uint32_t kNone = UINT32_MAX;
  NameTable() : slots_(64, kNone) { Intern(""); }

  uint32_t Intern(std::string_view s) {
    if ((size() + 1) * 5 > slots_.size() * 3) Grow();
    uint32_t* slot = Probe(s, Hash(s));
    if (*slot != kNone) return *slot;
    uint32_t id = static_cast<uint32_t>(size());
    arena_.append(s.data(), s.size());
    end_.push_back(static_cast<uint32_t>(arena_.size()));
    *slot = id;
    return id;
  }
  // kNone when absent.
  uint32_t Find(std::string_view s) const { return *const_cast<NameTable*>(this)->Probe(s, Hash(s)); }
  std::string_view Get(uint32_t id) const {
    uint32_t b = id ? end_[id - 1] : 0;
    return std::string_view(arena_).substr(b, end_[id] - b);
  }
  size_t size() const { return end_.size(); }
  size_t MemoryBytes() const { return arena_.capacity() + end_.capacity() * 4 + slots_.capacity() * 4; }

 private:
  static size_t Hash(std::string_view s) { return std::hash<std::string_view>()(s); }
  uint32_t* Probe(std::string_view s, size_t h) {
    size_t mask = slots_.size() - 1;
    for (size_t i = Mix64(h) & mask;; i = (i + 1) & mask) {
      uint32_t id = slots_[i];
      if (id == kNone || Get(id) == s) return &slots_[i];
    }
  }
  void Grow() {
    slots_.assign(slots_.size() * 2, kNone);
    size_t mask = slots_.size() - 1;
    for (uint32_t id = 0; id < size(); id++) {
      size_t i = Mix64(Hash(Get(id))) & mask;
      while (slots_[i] != kNone) i = (i + 1) & mask;
      slots_[i] = id;
    }
  }

  std::string arena_;
  std::vector<uint32_t> end_;    // id -> end of its bytes in arena_ (begin: the previous id's end)
  std::vector<uint32_t> slots_;  // open addressing over ids
};

class U64Table {
 public:
  static constexpr uint32_t kNone = UINT32_MAX;
  U64Table() : slots_(64, kNone) { Intern(0); }

  uint32_t Intern(uint64_t key) {
    if ((size() + 1) * 5 > slots_.size() * 3) Grow();
    uint32_t* slot = Probe(key);
    if (*slot != kNone) return *slot;
    uint32_t id = static_cast<uint32_t>(size());
    keys_.push_back(key);
    *slot = id;
    return id;
  }
  uint32_t Find(uint64_t key) const { return *const_cast<U64Table*>(this)->Probe(key); }
  uint64_t Get(uint32_t id) const { return keys_[id]; }
  size_t size() const { return keys_.size(); }
  size_t MemoryBytes() const { return keys_.capacity() * 8 + slots_.capacity() * 4; }

 private:
  uint32_t* Probe(uint64_t key) {
    size_t mask = slots_.size() - 1;
    for (size_t i = Mix64(key) & mask;; i = (i + 1) & mask) {
      uint32_t id = slots_[i];
      if (id == kNone || keys_[id] == key) return &slots_[i];
    }
  }
  void Grow() {
    slots_.assign(slots_.size() * 2, kNone);
    size_t mask = slots_.size() - 1;
    for (uint32_t id = 0; id < size(); id++) {
      size_t i = Mix64(keys_[id]) & mask;
      while (slots_[i] != kNone) i = (i + 1) & mask;
      slots_[i] = id;
    }
  }

  std::vector<uint64_t> keys_;
  std::vector<uint32_t> slots_;
};

}  // namespace fathom
