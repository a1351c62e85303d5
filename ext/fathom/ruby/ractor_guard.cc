#include "ractor_guard.h"

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
#endif
}  // namespace

bool OnMainRactor() {
#ifdef HAVE_RB_RACTOR_LOCAL_STORAGE_PTR_NEWKEY
  return rb_ractor_local_storage_ptr(g_main_key) == &g_main_marker;
#else
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
