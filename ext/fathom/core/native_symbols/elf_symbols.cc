#include "native_symbols/elf_symbols.h"

#include <elf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <utility>

namespace fathom {

namespace {

// Reads exactly `len` bytes at `offset`, false on a short read or error.
bool ReadAt(int fd, uint64_t offset, void* buf, size_t len) {
  auto* p = static_cast<char*>(buf);
  while (len > 0) {
    ssize_t n = pread(fd, p, len, static_cast<off_t>(offset));
    if (n <= 0) return false;
    p += n;
    offset += static_cast<uint64_t>(n);
    len -= static_cast<size_t>(n);
  }
  return true;
}

class Fd {
 public:
  explicit Fd(const std::string& path) : fd_(open(path.c_str(), O_RDONLY | O_CLOEXEC)) {}
  ~Fd() {
    if (fd_ >= 0) close(fd_);
  }
  Fd(const Fd&) = delete;
  Fd& operator=(const Fd&) = delete;
  int get() const { return fd_; }

 private:
  int fd_;
};

// Binding rank when several names share an address: a global name is what
// the user knows (rb_hash_aref, not a local alias), then weak, then local.
int BindingRank(unsigned char info) {
  switch (ELF64_ST_BIND(info)) {
    case STB_GLOBAL: return 0;
    case STB_WEAK: return 1;
    default: return 2;
  }
}

struct Candidate {
  ElfFunction fn;
  int rank;
};

// Appends the function symbols of one symbol table section.
bool ReadSymbolTable(int fd, uint64_t file_size, const Elf64_Shdr& symtab, const Elf64_Shdr& strtab,
                     std::vector<Candidate>* out) {
  if (symtab.sh_entsize != sizeof(Elf64_Sym)) return false;
  if (symtab.sh_offset > file_size || symtab.sh_size > file_size - symtab.sh_offset) return false;
  if (strtab.sh_offset > file_size || strtab.sh_size > file_size - strtab.sh_offset) return false;
  std::vector<Elf64_Sym> syms(symtab.sh_size / sizeof(Elf64_Sym));
  std::string strings(strtab.sh_size, '\0');
  if (!ReadAt(fd, symtab.sh_offset, syms.data(), syms.size() * sizeof(Elf64_Sym))) return false;
  if (!ReadAt(fd, strtab.sh_offset, &strings[0], strings.size())) return false;
  for (const Elf64_Sym& s : syms) {
    int type = ELF64_ST_TYPE(s.st_info);
    if (type != STT_FUNC && type != STT_GNU_IFUNC) continue;
    if (s.st_shndx == SHN_UNDEF || s.st_value == 0) continue;
    if (s.st_name >= strings.size()) continue;
    const char* name = strings.data() + s.st_name;
    size_t len = strnlen(name, strings.size() - s.st_name);
    if (len == 0) continue;
    out->push_back(Candidate{ElfFunction{s.st_value, s.st_size, std::string(name, len)}, BindingRank(s.st_info)});
  }
  return true;
}

// The hex build id from a SHT_NOTE section, "" if it holds none.
std::string ReadBuildId(int fd, uint64_t file_size, const Elf64_Shdr& note) {
  if (note.sh_offset > file_size || note.sh_size > file_size - note.sh_offset || note.sh_size > (1u << 16)) return {};
  std::string data(note.sh_size, '\0');
  if (!ReadAt(fd, note.sh_offset, &data[0], data.size())) return {};
  size_t pos = 0;
  auto align4 = [](size_t v) { return (v + 3) & ~static_cast<size_t>(3); };
  while (pos + sizeof(Elf64_Nhdr) <= data.size()) {
    Elf64_Nhdr nh;
    memcpy(&nh, data.data() + pos, sizeof nh);
    size_t name_at = pos + sizeof nh;
    size_t desc_at = name_at + align4(nh.n_namesz);
    if (desc_at > data.size() || nh.n_descsz > data.size() - desc_at) return {};
    if (nh.n_type == NT_GNU_BUILD_ID && nh.n_namesz == 4 && memcmp(data.data() + name_at, "GNU", 4) == 0) {
      static const char kHex[] = "0123456789abcdef";
      std::string hex;
      for (size_t i = 0; i < nh.n_descsz; ++i) {
        auto b = static_cast<unsigned char>(data[desc_at + i]);
        hex += kHex[b >> 4];
        hex += kHex[b & 15];
      }
      return hex;
    }
    pos = desc_at + align4(nh.n_descsz);
  }
  return {};
}

}  // namespace

ElfSymbols ElfSymbols::Read(const std::string& path) {
  ElfSymbols result;
  Fd fd(path);
  if (fd.get() < 0) return result;
  struct stat st;
  if (fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) return result;
  auto file_size = static_cast<uint64_t>(st.st_size);
  Elf64_Ehdr eh;
  if (!ReadAt(fd.get(), 0, &eh, sizeof eh)) return result;
  if (memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 || eh.e_ident[EI_CLASS] != ELFCLASS64) return result;
  if (eh.e_shentsize != sizeof(Elf64_Shdr) || eh.e_shnum == 0 || eh.e_shoff > file_size ||
      uint64_t{eh.e_shnum} * sizeof(Elf64_Shdr) > file_size - eh.e_shoff) {
    return result;
  }
  std::vector<Elf64_Shdr> sections(eh.e_shnum);
  if (!ReadAt(fd.get(), eh.e_shoff, sections.data(), sections.size() * sizeof(Elf64_Shdr))) return result;

  std::vector<Candidate> candidates;
  for (const Elf64_Shdr& sh : sections) {
    if (sh.sh_type == SHT_NOTE && result.build_id_.empty()) result.build_id_ = ReadBuildId(fd.get(), file_size, sh);
    if (sh.sh_type != SHT_SYMTAB && sh.sh_type != SHT_DYNSYM) continue;
    if (sh.sh_link >= sections.size()) continue;
    if (ReadSymbolTable(fd.get(), file_size, sh, sections[sh.sh_link], &candidates) && sh.sh_type == SHT_SYMTAB) {
      result.has_symtab_ = true;
    }
  }
  // One name per address: the best-ranked, then the shortest (a compiler's
  // "foo.cold"/"foo.part.0" clones sit at their own addresses anyway), then
  // the first in byte order, so the choice does not depend on table order.
  std::sort(candidates.begin(), candidates.end(), [](const Candidate& a, const Candidate& b) {
    if (a.fn.start != b.fn.start) return a.fn.start < b.fn.start;
    if (a.rank != b.rank) return a.rank < b.rank;
    if (a.fn.name.size() != b.fn.name.size()) return a.fn.name.size() < b.fn.name.size();
    return a.fn.name < b.fn.name;
  });
  for (Candidate& c : candidates) {
    if (!result.functions_.empty() && result.functions_.back().start == c.fn.start) {
      // The same function in .symtab and .dynsym: keep the first, but a size.
      if (result.functions_.back().size == 0) result.functions_.back().size = c.fn.size;
      continue;
    }
    result.functions_.push_back(std::move(c.fn));
  }
  return result;
}

void ElfSymbols::Merge(ElfSymbols&& other) {
  for (ElfFunction& f : other.functions_) functions_.push_back(std::move(f));
  has_symtab_ = has_symtab_ || other.has_symtab_;
  Sort();
}

void ElfSymbols::Sort() {
  // Stable: the entries already here (this file's) win over merged ones.
  std::stable_sort(functions_.begin(), functions_.end(),
                   [](const ElfFunction& a, const ElfFunction& b) { return a.start < b.start; });
  functions_.erase(std::unique(functions_.begin(), functions_.end(),
                               [](const ElfFunction& a, const ElfFunction& b) { return a.start == b.start; }),
                   functions_.end());
}

const ElfFunction* ElfSymbols::Find(uint64_t address) const {
  auto it = std::upper_bound(functions_.begin(), functions_.end(), address,
                             [](uint64_t a, const ElfFunction& f) { return a < f.start; });
  if (it == functions_.begin()) return nullptr;
  const ElfFunction& f = *(it - 1);
  if (f.size != 0) return address < f.start + f.size ? &f : nullptr;
  // No size: accept up to the next symbol only (an assembly routine).
  return (it != functions_.end() || address - f.start < 4096) ? &f : nullptr;
}

}  // namespace fathom
