// Turns native PCs (from CaptureNativePcs) into (function, shared object)
// names, off the signal path: the loaded objects come from dl_iterate_phdr,
// their functions from the files' ELF symbol tables (elf_symbols.h), read
// once per object and cached. C++ names are demangled.
//
// Not thread-safe: one symbolizer per flushing thread (or a lock around it).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "native_symbols/elf_symbols.h"

namespace fathom {

struct NativeFrame {
  // "deflate", "rb_hash_aref", "std::vector<int>::push_back(int const&)";
  // "" when no symbol covers the PC (a static function of a stripped object).
  std::string function;
  // The object's file name without its directory: "libz.so.1",
  // "libruby-3.1.so.3.1", "zlib.so"; "" when the PC is in no loaded object.
  std::string object;
  std::string object_path;  // the full path as the dynamic loader has it
  uint64_t object_offset = 0;  // PC minus the object's load base
  uint64_t function_offset = 0;  // PC minus the function's start, when named

  // "deflate" or, with no function name, "<libz.so.1>" / "<0x7f...>": one
  // name per frame for a profile, where an unknown function of an object is
  // aggregated under the object.
  std::string DisplayName() const;
};

class NativeSymbolizer {
 public:
  // Where separate debug files are looked up by build id
  // (<dir>/.build-id/ab/cdef....debug, e.g. from Debian's *-dbgsym
  // packages); they add the static functions a stripped object lacks.
  explicit NativeSymbolizer(std::string debug_dir = "/usr/lib/debug");
  ~NativeSymbolizer();
  NativeSymbolizer(const NativeSymbolizer&) = delete;
  NativeSymbolizer& operator=(const NativeSymbolizer&) = delete;

  // Re-reads the list of loaded objects. Symbolize calls it by itself when a
  // PC falls in no known object (a library loaded since); call it
  // explicitly after a dlclose, whose addresses may be reused.
  void Refresh();

  NativeFrame Symbolize(uintptr_t pc);

  // The path of the loaded object containing `pc`, "" if none.
  std::string ObjectPathOf(uintptr_t pc);

 private:
  struct Object;
  const Object* FindObject(uintptr_t pc);
  const ElfSymbols& SymbolsOf(const std::string& path);

  std::string debug_dir_;
  std::vector<Object> objects_;  // sorted by start address
  std::map<std::string, std::unique_ptr<ElfSymbols>> symbols_;  // by path
};

// abi::__cxa_demangle of `name` when it is a mangled C++ name, else `name`;
// either way without a compiler clone suffix (.part.0, .cold, .isra.0).
std::string DemangleNative(const std::string& name);

}  // namespace fathom
