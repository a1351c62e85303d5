#include "dump/dump_heap.h"

#include <string_view>

namespace fathom {

namespace {
struct TypeEntry {
  std::string_view name;
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

// Length, first and last letter: tells the 27 spellings apart but for a
// few, so the loop compares one word per entry and the bytes of one or two.
constexpr uint32_t TypeKey(std::string_view s) {
  return s.empty() ? 0 : static_cast<uint32_t>(s.size()) | static_cast<uint32_t>(static_cast<unsigned char>(s[0])) << 8 |
                             static_cast<uint32_t>(static_cast<unsigned char>(s[s.size() - 1])) << 16;
}

DumpType DumpTypeFromName(const char* name, size_t len) {
  std::string_view s(name, len);
  uint32_t key = TypeKey(s);
  for (const auto& t : kTypes)
    if (TypeKey(t.name) == key && t.name == s) return t.type;
  return kDumpTypeUnknown;
}

const char* DumpTypeClassName(uint8_t type) {
  for (const auto& t : kTypes)
    if (t.type == type) return t.class_name;
  return "unknown";
}

std::string DumpHeap::SiteName(uint32_t site_id) const {
  if (site_id == 0) return "";
  uint64_t key = sites.Get(site_id);
  std::string s(files.Get(static_cast<uint32_t>(key >> 32)));
  s += ':';
  s += std::to_string(static_cast<uint32_t>(key));
  return s;
}

size_t DumpHeap::MemoryBytes() const {
  size_t roots_bytes = 0;
  for (const auto& r : roots) roots_bytes += r.refs.capacity() * 8;
  roots_bytes += (pinned_object_lists.capacity() + ractors.capacity()) * 8;
  return address.MemoryBytes() + klass.MemoryBytes() + memsize.MemoryBytes() + type.MemoryBytes() +
         ref_begin.MemoryBytes() + refs.MemoryBytes() + name.MemoryBytes() + site.MemoryBytes() +
         generation.MemoryBytes() + roots_bytes + classes.MemoryBytes() + names.MemoryBytes() + files.MemoryBytes() +
         sites.MemoryBytes() + prefixes.MemoryBytes() + prefix_count.capacity() * 4;
}

}  // namespace fathom
