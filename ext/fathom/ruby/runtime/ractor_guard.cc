#include "ruby/runtime/ractor_guard.h"
#include "ruby/init.h"

#include <atomic>

#ifdef HAVE_RB_RACTOR_LOCAL_STORAGE_PTR_NEWKEY
#include <ruby/ractor.h>
#endif

namespace fathom {
namespace {
std::atomic<bool> g_other_ractor_seen{false};
#ifdef HAVE_RB_RACTOR_LOCAL_STORAGE_PTR_NEWKEY
rb_ractor_local_key_t g_main_key = nullptr;
char g_main_marker;  // its address is the marker
// The last Ruby thread the full test found on the main Ractor. Exact mode
// asks once per allocation, nearly always from the same thread, which the
// NEWOBJ hook has at hand anyway (it records it): comparing it is a load
// and a compare, where rb_ractor_local_storage_ptr is a call and a table
// probe (about 35 instructions, with rb_thread_current's TLS lookup; the
// two together cost 4-8% of exact mode on the allocation loop).
// A Thread never changes Ractor. The one way to be wrong is a main-Ractor
// Thread freed and its slot reused by a Thread of another Ractor while
// this still names it, and that needs a hook fired on another Ractor,
// which Ruby 3.x never does (hooks are per Ractor, see the header).
std::atomic<VALUE> g_known_main_thread{Qnil};
#endif
}  // namespace

bool OnMainRactor() { return OnMainRactor(rb_thread_current()); }

bool OnMainRactor(VALUE thread) {
#ifdef HAVE_RB_RACTOR_LOCAL_STORAGE_PTR_NEWKEY
  if (thread == g_known_main_thread.load(std::memory_order_relaxed)) return true;
  if (rb_ractor_local_storage_ptr(g_main_key) != &g_main_marker) return false;
  g_known_main_thread.store(thread, std::memory_order_relaxed);
  return true;
#else
  (void)thread;
  return true;  // no Ractors on this Ruby
#endif
}

void NoteOtherRactor() { g_other_ractor_seen.store(true, std::memory_order_relaxed); }

bool OtherRactorSeen() { return g_other_ractor_seen.load(std::memory_order_relaxed); }

void InitRactorGuard(VALUE mNative) {
#ifdef HAVE_RB_RACTOR_LOCAL_STORAGE_PTR_NEWKEY
  // A key with no mark/free functions: the slot holds a plain C pointer.
  g_main_key = rb_ractor_local_storage_ptr_newkey(nullptr);
  rb_ractor_local_storage_ptr_set(g_main_key, &g_main_marker);
#endif
  // Native.other_ractor_seen? -> whether a hook has fired on a Ractor other
  // than the main one: profiles since then leave it out.
  rb_define_module_function(
      mNative, "other_ractor_seen?", [](VALUE) -> VALUE { return OtherRactorSeen() ? Qtrue : Qfalse; }, 0);
}

}  // namespace fathom
