#include "gvl_owner.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>

#include <ruby.h>
#ifdef HAVE_RB_INTERNAL_THREAD_ADD_EVENT_HOOK
#include <ruby/thread.h>
#endif

namespace fathom {
namespace GvlOwner {
namespace {

std::atomic<pid_t> g_owner{0};
std::atomic<bool> g_watching{false};

pid_t CurrentTid() { return static_cast<pid_t>(syscall(SYS_gettid)); }

#ifdef HAVE_RB_INTERNAL_THREAD_ADD_EVENT_HOOK
rb_internal_thread_event_hook_t* g_hook = nullptr;

// Runs on the thread whose GVL state changes, with or without the GVL: no
// allocation, no Ruby. SUSPENDED clears the owner only if it is still the
// caller (the next owner's RESUMED may not have come yet, or may already
// have: compare-and-swap keeps the newer one).
void OnGvlEvent(rb_event_flag_t event, const rb_internal_thread_event_data_t*, void*) {
  if (!g_watching.load(std::memory_order_relaxed)) return;
  pid_t me = CurrentTid();
  if (event == RUBY_INTERNAL_THREAD_EVENT_RESUMED) {
    g_owner.store(me, std::memory_order_relaxed);
  } else {
    pid_t expected = me;
    g_owner.compare_exchange_strong(expected, 0, std::memory_order_relaxed);
  }
}
#endif

}  // namespace

bool Available() {
#ifdef HAVE_RB_INTERNAL_THREAD_ADD_EVENT_HOOK
  return true;
#else
  return false;
#endif
}

void Watch() {
  g_owner.store(CurrentTid());
  g_watching.store(true);
#ifdef HAVE_RB_INTERNAL_THREAD_ADD_EVENT_HOOK
  if (g_hook == nullptr)
    g_hook = rb_internal_thread_add_event_hook(
        OnGvlEvent, RUBY_INTERNAL_THREAD_EVENT_RESUMED | RUBY_INTERNAL_THREAD_EVENT_SUSPENDED, nullptr);
#endif
}

void Unwatch() { g_watching.store(false); }

pid_t Current() { return g_owner.load(std::memory_order_relaxed); }

void AfterForkChild() { g_owner.store(CurrentTid()); }

}  // namespace GvlOwner
}  // namespace fathom
