// DumpHeap: the objects of an ObjectSpace.dump_all file, as compact arrays
// (what the reader keeps of each JSON line), before the graph is built.
//
// Per object: address 8, class id 4 (the class's address, interned: a dump
// has thousands of classes, not millions), memsize 4, type 1, reference
// offset 4, name 4 (a class's or module's name, a string's prefix), plus 8
// per reference (an address: the target may come later in the file;
// BuildDumpGraph rewrites them in place as 4-byte indices); site 4 and
// generation 4 only when the dump has allocation tracing
// (file/line/generation). Roots: one list of addresses per category, in
// first-appearance order. The per-object arrays are BigArrays (no copy
// while they grow: see base/big_array.h).
//
// String prefixes: a STRING record is named by the start of its value, up
// to string_prefix_bytes of printable ASCII and cut before the first digit
// ("key-123" and "key-456" are both "key-…"), so that numbered strings share
// a name. At most kMaxPrefixes distinct prefixes are kept (with a count
// each); strings past that are not named (unnamed_strings counts them), and
// the graph names strings by the kMaxNamedPrefixes most common only: a
// flame graph wants a few names, and every name is a distinct frame.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/big_array.h"
#include "dump/dump_tables.h"

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
  static constexpr uint32_t kMaxPrefixes = 1u << 16;
  static constexpr uint32_t kMaxNamedPrefixes = 256;

  BigArray<uint64_t> address;
  BigArray<uint32_t> klass;             // id in classes (its address); 0: none (hidden object)
  BigArray<uint32_t> memsize;           // saturated at UINT32_MAX - 1
  BigArray<uint8_t> type;
  BigArray<uint32_t> ref_begin;         // size() + 1 entries once read
  BigArray<uint64_t> refs;              // referenced addresses
  BigArray<uint32_t> name;              // CLASS/MODULE: id in names; STRING: id in prefixes; 0 = none
  // Filled only when some object has file/line/generation.
  BigArray<uint32_t> site;              // id in sites; 0 = none
  BigArray<uint32_t> generation;        // kNoGeneration = none

  struct RootCategory {
    std::string name;
    std::vector<uint64_t> refs;
  };
  std::vector<RootCategory> roots;
  // Addresses of the DATA records of Ruby 3.4's buckets of pinned objects
  // (struct "VM/pin_array_list", hidden) and of Ractors (struct "ractor"):
  // BuildDumpGraph gives the vm root 3.3's shape with them
  // (roots/vm_roots.h). Empty before 3.4 and for the Ractors' part of
  // a dump without them.
  std::vector<uint64_t> pinned_object_lists;
  std::vector<uint64_t> ractors;
  U64Table classes;                     // class id -> class address
  NameTable names;                      // class and module names
  NameTable files;                      // allocation files
  U64Table sites;                       // site id -> (file id << 32 | line)
  NameTable prefixes;                   // string prefixes, quoted: "\"key-…\""
  std::vector<uint32_t> prefix_count;   // strings per prefix id
  uint64_t unnamed_strings = 0;         // strings past kMaxPrefixes distinct prefixes

  bool has_sites = false;
  bool has_generations = false;

  size_t size() const { return address.size(); }
  uint64_t RefCount() const { return refs.size(); }
  // "file:line" of a site id ("" for 0).
  std::string SiteName(uint32_t site_id) const;
  size_t MemoryBytes() const;
};

}  // namespace fathom
