// DumpHeap: the objects of an ObjectSpace.dump_all file, as compact arrays
// (what the reader keeps of each JSON line), before the graph is built.
//
// Per object: address 8, class address 8, memsize 4, type 1, reference
// offset 4, name 4 (a class's or module's name, a string's short prefix),
// plus 8 per reference; site 4 and generation 4 only when the dump has
// allocation tracing (file/line/generation). Roots: one list of addresses
// per category, in first-appearance order.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/string_interner.h"

namespace fathom {

// Ruby's T_xxx values (ruby/internal/value_type.h), so that a dump node's
// type means what a snapshot node's does. kDumpTypeUnknown never appears in
// a DumpHeap: an unknown type is an error.
enum DumpType : uint8_t {
  kDumpNone = 0x00, kDumpObject = 0x01, kDumpClass = 0x02, kDumpModule = 0x03, kDumpFloat = 0x04,
  kDumpString = 0x05, kDumpRegexp = 0x06, kDumpArray = 0x07, kDumpHash = 0x08, kDumpStruct = 0x09,
  kDumpBignum = 0x0a, kDumpFile = 0x0b, kDumpData = 0x0c, kDumpMatch = 0x0d, kDumpComplex = 0x0e,
  kDumpRational = 0x0f, kDumpNil = 0x11, kDumpTrue = 0x12, kDumpFalse = 0x13, kDumpSymbol = 0x14,
  kDumpFixnum = 0x15, kDumpUndef = 0x16, kDumpImemo = 0x1a, kDumpNode = 0x1b, kDumpIclass = 0x1c,
  kDumpZombie = 0x1d, kDumpMoved = 0x1e, kDumpTypeUnknown = 0xff
};

// The dump's spelling of a type ("STRING") to its value; kDumpTypeUnknown otherwise.
DumpType DumpTypeFromName(const char* name, size_t len);
// A Ruby-ish class name for a type ("String", "imemo").
const char* DumpTypeClassName(uint8_t type);

struct DumpHeap {
  static constexpr uint32_t kNoGeneration = UINT32_MAX;

  std::vector<uint64_t> address;
  std::vector<uint64_t> class_address;  // 0: none (hidden object)
  std::vector<uint32_t> memsize;        // saturated at UINT32_MAX
  std::vector<uint8_t> type;
  std::vector<uint32_t> ref_begin;      // size() + 1 entries once read
  std::vector<uint64_t> refs;           // referenced addresses
  std::vector<uint32_t> name;           // id in names; 0 = none
  // Filled only when some object has file/line/generation.
  std::vector<uint32_t> site;           // id in names ("file:line"); 0 = none
  std::vector<uint32_t> generation;     // kNoGeneration = none

  struct RootCategory {
    std::string name;
    std::vector<uint64_t> refs;
  };
  std::vector<RootCategory> roots;
  StringInterner names;

  bool has_sites = false;
  bool has_generations = false;

  size_t size() const { return address.size(); }
  uint64_t RefCount() const { return refs.size(); }
  size_t MemoryBytes() const;
};

}  // namespace fathom
