#include "ractor_guard.h"

#include <ruby.h>

#include <atomic>

#include "ruby_private_api.h"

namespace fathom {
namespace {
std::atomic<bool> g_other_ractor_seen{false};
}  // namespace

bool OnMainRactor() {
#ifdef HAVE_RB_RACTOR_MAIN_P_
  return rb_ractor_main_p_();
#else
  return true;  // a Ruby that does not export it: hooks behave as before
#endif
}

void NoteOtherRactor() { g_other_ractor_seen.store(true, std::memory_order_relaxed); }

bool OtherRactorSeen() { return g_other_ractor_seen.load(std::memory_order_relaxed); }

}  // namespace fathom
