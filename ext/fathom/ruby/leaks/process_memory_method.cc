// Fathom::Native.process_memory -> {rss:, malloc_arena:, malloc_in_use:,
// malloc_free:, malloc_mmap:}: core/leaks/process_memory.h for Ruby. A key
// is left out when its value is unknown (no /proc, no mallinfo2). Leaks::Memory
// adds Ruby's heap pages and slots and writes the line every heap window
// carries (docs/internals/leaks.md, "Growth outside Ruby objects").
#include "ruby/init.h"

#include "leaks/process_memory.h"
#include "ruby/runtime/boundary.h"

namespace fathom {
namespace {

VALUE NativeProcessMemory(VALUE) {
  return RubyMethod([] {
    leaks::ProcessMemory m = leaks::ReadProcessMemory();
    VALUE h = rb_hash_new();
    auto set = [h](const char* key, unsigned long long v) { rb_hash_aset(h, ID2SYM(rb_intern(key)), ULL2NUM(v)); };
    if (m.rss_bytes >= 0) set("rss", static_cast<unsigned long long>(m.rss_bytes));
    if (m.malloc_known) {
      set("malloc_arena", m.malloc_arena_bytes);
      set("malloc_in_use", m.malloc_in_use_bytes);
      set("malloc_free", m.malloc_free_bytes);
      set("malloc_mmap", m.malloc_mmap_bytes);
    }
    return h;
  });
}

}  // namespace

void InitProcessMemory(VALUE mNative) {
  rb_define_module_function(mNative, "process_memory", RUBY_METHOD_FUNC(NativeProcessMemory), 0);
}

}  // namespace fathom
