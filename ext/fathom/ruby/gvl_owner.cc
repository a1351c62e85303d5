#include "gvl_owner.h"

#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cstdint>

#include <ruby.h>
#ifdef HAVE_RB_INTERNAL_THREAD_ADD_EVENT_HOOK
#include <ruby/thread.h>
#endif

#include "base/clock.h"

namespace fathom {
namespace GvlOwner {
namespace {

std::atomic<pid_t> g_owner{0};
std::atomic<bool> g_watching{false};
// The CPU of Ruby code: the summed CPU time of finished GVL holds, and the
// owner's CPU clock when it took the GVL (HeldCpu adds the hold so far).
// A clock read that fails gives 0 (ClockNs): such a hold counts nothing.
std::atomic<int64_t> g_held_cpu_ns{0};
std::atomic<int64_t> g_owner_resumed_cpu_ns{0};
pid_t CurrentTid() { return static_cast<pid_t>(syscall(SYS_gettid)); }

#ifdef HAVE_RB_INTERNAL_THREAD_ADD_EVENT_HOOK
rb_internal_thread_event_hook_t* g_hook = nullptr;
// This thread's CPU clock when it took the GVL (-1: not measured). The hook
// runs on the thread itself. initial-exec: static TLS, no lazy allocation
// on a thread's first access (general-dynamic TLS in a dlopen'd library
// allocates there), which the hook must not do.
__attribute__((tls_model("initial-exec"))) thread_local int64_t t_resumed_cpu_ns = -1;

// Runs on the thread whose GVL state changes, with or without the GVL: no
// allocation, no Ruby. SUSPENDED clears the owner only if it is still the
// caller (the next owner's RESUMED may not have come yet, or may already
// have: compare-and-swap keeps the newer one).
void OnGvlEvent(rb_event_flag_t event, const rb_internal_thread_event_data_t*, void*) {
  if (!g_watching.load(std::memory_order_relaxed)) return;
  pid_t me = CurrentTid();
  // Two reads of the thread's own CPU clock per handover (a syscall each,
  // ~0.2 us): what the heap sampler's pacer needs to count only CPU spent
  // holding the GVL (TickPacer::WakeHeld).
  int64_t cpu = ThreadCpuNs();
  if (event == RUBY_INTERNAL_THREAD_EVENT_RESUMED) {
    t_resumed_cpu_ns = cpu;
    g_owner_resumed_cpu_ns.store(cpu, std::memory_order_relaxed);
    g_owner.store(me, std::memory_order_release);
  } else {
    if (t_resumed_cpu_ns > 0 && cpu >= t_resumed_cpu_ns)
      g_held_cpu_ns.fetch_add(cpu - t_resumed_cpu_ns, std::memory_order_relaxed);
    t_resumed_cpu_ns = -1;
    pid_t expected = me;
    g_owner.compare_exchange_strong(expected, 0, std::memory_order_relaxed);
  }
}
#endif

// The caller holds the GVL: it is the owner from now, its hold measured
// from now (no RESUMED comes for a hold already under way).
void TakeOwnership() {
  int64_t cpu = ThreadCpuNs();
#ifdef HAVE_RB_INTERNAL_THREAD_ADD_EVENT_HOOK
  t_resumed_cpu_ns = cpu;
#endif
  g_owner_resumed_cpu_ns.store(cpu, std::memory_order_relaxed);
  g_owner.store(CurrentTid(), std::memory_order_release);
}

}  // namespace

bool Available() {
#ifdef HAVE_RB_INTERNAL_THREAD_ADD_EVENT_HOOK
  return true;
#else
  return false;
#endif
}

void Watch() {
  TakeOwnership();
  g_watching.store(true);
#ifdef HAVE_RB_INTERNAL_THREAD_ADD_EVENT_HOOK
  if (g_hook == nullptr)
    g_hook = rb_internal_thread_add_event_hook(
        OnGvlEvent, RUBY_INTERNAL_THREAD_EVENT_RESUMED | RUBY_INTERNAL_THREAD_EVENT_SUSPENDED, nullptr);
#endif
}

void Unwatch() { g_watching.store(false); }

pid_t Current() { return g_owner.load(std::memory_order_relaxed); }

pid_t HeldCpu(int64_t* held_ns) {
  pid_t owner = g_owner.load(std::memory_order_acquire);
  int64_t held = g_held_cpu_ns.load(std::memory_order_relaxed);
  if (owner != 0) {
    int64_t resumed = g_owner_resumed_cpu_ns.load(std::memory_order_relaxed);
    int64_t now = ClockNs(ThreadCpuClock(owner));
    // Across a handover the pair can be mismatched; the pacer keeps its
    // highest reading, so a low one only delays a tick.
    if (resumed > 0 && now > resumed && g_owner.load(std::memory_order_relaxed) == owner) held += now - resumed;
  }
  *held_ns = held;
  return owner;
}

void AfterForkChild() { TakeOwnership(); }

}  // namespace GvlOwner
}  // namespace fathom
