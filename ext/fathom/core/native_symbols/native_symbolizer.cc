#include "native_symbols/native_symbolizer.h"

#include <cxxabi.h>
#include <link.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <utility>

namespace fathom {

// One loaded object: the address range of its loadable segments.
struct NativeSymbolizer::Object {
  uintptr_t start = 0;
  uintptr_t end = 0;   // one past the last byte of the last PT_LOAD
  uintptr_t base = 0;  // dlpi_addr: file address + base = runtime address
  std::string path;
};

namespace {

std::string Basename(const std::string& path) {
  size_t slash = path.rfind('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// The main executable is reported with an empty name.
std::string SelfExePath() {
  char buf[4096];
  ssize_t n = readlink("/proc/self/exe", buf, sizeof buf - 1);
  return n > 0 ? std::string(buf, static_cast<size_t>(n)) : std::string();
}

}  // namespace

std::string DemangleNative(const std::string& name) {
  if (name.size() < 2 || name[0] != '_' || name[1] != 'Z') {
    // A C name with a compiler clone suffix (deflate_slow.part.0,
    // rb_hash_aref.cold, foo.isra.0, foo.lto_priv.0): the function the user
    // knows. A C identifier has no '.', so all after the first one goes.
    size_t dot = name.find('.');
    return dot == std::string::npos || dot == 0 ? name : name.substr(0, dot);
  }
  int status = 0;
  char* out = abi::__cxa_demangle(name.c_str(), nullptr, nullptr, &status);
  if (status != 0 || out == nullptr) {
    free(out);
    return name;
  }
  std::string result(out);
  free(out);
  // The demangler spells clones "f(int) [clone .isra.0] [clone .cold]".
  for (size_t at; (at = result.find(" [clone ")) != std::string::npos;) {
    size_t end = result.find(']', at);
    if (end == std::string::npos) break;
    result.erase(at, end + 1 - at);
  }
  return result;
}

std::string NativeFrame::DisplayName() const {
  if (!function.empty()) return function;
  if (!object.empty()) return "<" + object + ">";
  char buf[32];
  snprintf(buf, sizeof buf, "<0x%llx>", static_cast<unsigned long long>(object_offset));
  return buf;
}

NativeSymbolizer::NativeSymbolizer(std::string debug_dir) : debug_dir_(std::move(debug_dir)) {}
NativeSymbolizer::~NativeSymbolizer() = default;

void NativeSymbolizer::Refresh() {
  std::vector<Object> objects;
  dl_iterate_phdr(
      [](struct dl_phdr_info* info, size_t, void* data) -> int {
        auto* list = static_cast<std::vector<Object>*>(data);
        Object o;
        o.base = info->dlpi_addr;
        bool any = false;
        for (int i = 0; i < info->dlpi_phnum; ++i) {
          const ElfW(Phdr)& ph = info->dlpi_phdr[i];
          if (ph.p_type != PT_LOAD) continue;
          uintptr_t s = info->dlpi_addr + ph.p_vaddr;
          uintptr_t e = s + ph.p_memsz;
          o.start = any ? std::min(o.start, s) : s;
          o.end = any ? std::max(o.end, e) : e;
          any = true;
        }
        if (!any) return 0;
        o.path = info->dlpi_name ? info->dlpi_name : "";
        list->push_back(std::move(o));
        return 0;
      },
      &objects);
  for (Object& o : objects) {
    if (o.path.empty()) o.path = SelfExePath();  // the main program (first entry)
  }
  std::sort(objects.begin(), objects.end(), [](const Object& a, const Object& b) { return a.start < b.start; });
  objects_ = std::move(objects);
}

const NativeSymbolizer::Object* NativeSymbolizer::FindObject(uintptr_t pc) {
  for (int attempt = 0; attempt < 2; ++attempt) {
    auto it = std::upper_bound(objects_.begin(), objects_.end(), pc,
                               [](uintptr_t p, const Object& o) { return p < o.start; });
    if (it != objects_.begin() && pc < (it - 1)->end) return &*(it - 1);
    if (attempt == 0) Refresh();  // loaded since the last look
  }
  return nullptr;
}

const ElfSymbols& NativeSymbolizer::SymbolsOf(const std::string& path) {
  auto it = symbols_.find(path);
  if (it != symbols_.end()) return *it->second;
  auto table = std::make_unique<ElfSymbols>(ElfSymbols::Read(path));
  // A stripped object (Debian's) has only .dynsym; its debug file, when
  // installed, has the .symtab with the static functions too.
  if (!table->has_symtab() && table->build_id().size() > 2 && !debug_dir_.empty()) {
    const std::string& id = table->build_id();
    std::string debug_path = debug_dir_ + "/.build-id/" + id.substr(0, 2) + "/" + id.substr(2) + ".debug";
    if (access(debug_path.c_str(), R_OK) == 0) table->Merge(ElfSymbols::Read(debug_path));
  }
  return *symbols_.emplace(path, std::move(table)).first->second;
}

std::string NativeSymbolizer::ObjectPathOf(uintptr_t pc) {
  const Object* o = FindObject(pc);
  return o ? o->path : std::string();
}

NativeFrame NativeSymbolizer::Symbolize(uintptr_t pc) {
  NativeFrame frame;
  const Object* o = FindObject(pc);
  if (o == nullptr) {
    frame.object_offset = pc;
    return frame;
  }
  frame.object_path = o->path;
  frame.object = Basename(o->path);
  frame.object_offset = pc - o->base;
  // The vDSO has no file ("linux-vdso.so.1"): it stays unnamed.
  const ElfFunction* fn = SymbolsOf(o->path).Find(frame.object_offset);
  if (fn != nullptr) {
    frame.function = DemangleNative(fn->name);
    frame.function_offset = frame.object_offset - fn->start;
  }
  return frame;
}

}  // namespace fathom
