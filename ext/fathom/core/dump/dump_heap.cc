#include "dump/dump_heap.h"

#include <cstring>

namespace fathom {

namespace {
struct TypeEntry {
  const char* name;
  DumpType type;
  const char* class_name;
};
// The spellings of ext/objspace's obj_type() (Ruby 3.1-3.4).
constexpr TypeEntry kTypes[] = {
    {"NONE", kDumpNone, "none"},         {"OBJECT", kDumpObject, "Object"},   {"CLASS", kDumpClass, "Class"},
    {"MODULE", kDumpModule, "Module"},   {"FLOAT", kDumpFloat, "Float"},      {"STRING", kDumpString, "String"},
    {"REGEXP", kDumpRegexp, "Regexp"},   {"ARRAY", kDumpArray, "Array"},      {"HASH", kDumpHash, "Hash"},
    {"STRUCT", kDumpStruct, "Struct"},   {"BIGNUM", kDumpBignum, "Integer"},  {"FILE", kDumpFile, "File"},
    {"DATA", kDumpData, "Data"},         {"MATCH", kDumpMatch, "MatchData"},  {"COMPLEX", kDumpComplex, "Complex"},
    {"RATIONAL", kDumpRational, "Rational"}, {"NIL", kDumpNil, "NilClass"}, {"TRUE", kDumpTrue, "TrueClass"},
    {"FALSE", kDumpFalse, "FalseClass"}, {"SYMBOL", kDumpSymbol, "Symbol"},   {"FIXNUM", kDumpFixnum, "Integer"},
    {"UNDEF", kDumpUndef, "undef"},      {"IMEMO", kDumpImemo, "imemo"},      {"NODE", kDumpNode, "node"},
    {"ICLASS", kDumpIclass, "iclass"},   {"ZOMBIE", kDumpZombie, "zombie"},   {"MOVED", kDumpMoved, "moved"},
};
}  // namespace

DumpType DumpTypeFromName(const char* name, size_t len) {
  for (const auto& t : kTypes)
    if (std::strlen(t.name) == len && std::memcmp(t.name, name, len) == 0) return t.type;
  return kDumpTypeUnknown;
}

const char* DumpTypeClassName(uint8_t type) {
  for (const auto& t : kTypes)
    if (t.type == type) return t.class_name;
  return "unknown";
}

size_t DumpHeap::MemoryBytes() const {
  return address.capacity() * 8 + class_address.capacity() * 8 + memsize.capacity() * 4 + type.capacity() +
         ref_begin.capacity() * 4 + refs.capacity() * 8 + name.capacity() * 4 + site.capacity() * 4 +
         generation.capacity() * 4;
}

}  // namespace fathom
