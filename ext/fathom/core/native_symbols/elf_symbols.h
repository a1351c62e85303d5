// The function symbols of one ELF file (an executable or shared object),
// read from the file itself: .symtab when the file has one (not stripped),
// else .dynsym (the exported functions, which every shared object keeps).
// No libelf/libdw: the few structures needed come from <elf.h>.
//
// Addresses are the file's own (st_value): for a shared object or PIE that
// is the offset from its load base, for a non-PIE executable the absolute
// address. Runs off the signal path (it reads files and allocates).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace fathom {

struct ElfFunction {
  uint64_t start = 0;
  uint64_t size = 0;  // 0 when the symbol table does not say
  std::string name;   // as in the file (mangled for C++)
};

class ElfSymbols {
 public:
  // Reads `path`. A missing, unreadable, 32-bit or malformed file gives an
  // empty table (every lookup then misses): symbolizing is best effort.
  static ElfSymbols Read(const std::string& path);

  // The function containing `address`, or nullptr. A symbol without a size
  // contains the addresses up to the next symbol.
  const ElfFunction* Find(uint64_t address) const;

  // The GNU build id of the file (hex), "" when it has none. Used to find a
  // separate debug file under /usr/lib/debug/.build-id/.
  const std::string& build_id() const { return build_id_; }
  bool has_symtab() const { return has_symtab_; }
  size_t size() const { return functions_.size(); }

  // Adds the functions of `other` (a debug file's .symtab) to this table.
  void Merge(ElfSymbols&& other);

 private:
  void Sort();

  std::vector<ElfFunction> functions_;  // sorted by start, one per address
  std::string build_id_;
  bool has_symtab_ = false;
};

}  // namespace fathom
