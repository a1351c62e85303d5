#include "ruby/runtime/gvl_owner.h"

#include <pthread.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdint>

#include <ruby.h>
#ifdef HAVE_RB_INTERNAL_THREAD_ADD_EVENT_HOOK
#include <ruby/thread.h>
#endif

#include "base/clock.h"
#include "ruby/runtime/thread_registry.h"

namespace fathom {
namespace GvlOwner {
namespace {

std::atomic<pid_t> g_owner{0};
std::atomic<bool> g_watching{false};
// The CPU of Ruby code (TickPacer::WakeHeld): the summed time of finished
// GVL holds, and for the hold under way when the owner took the GVL
// (monotonic) and its CPU clock at its last read (HeldCpu adds the hold so
// far).
//
// What a hold is credited: a short one (under kShortHoldNs of wall time)
// its wall time, a longer one min(its wall time, the thread's CPU since its
// last read). A thread CPU clock read is a syscall, 1.5 us on this
// project's VMs; reading it at every handover (two per hold) cost 1.7x on
// bench/overhead.rb's gvl_pingpong (100k handovers a second) against 1.3x
// without. A monotonic read is a vDSO call (~60 ns). A short hold is on a
// CPU throughout but for a rare preemption, and a long one reads the CPU
// clock once, at its end: the min() keeps a holder the OS took off its CPU
// from being credited the wait, and a thread's CPU in C without the GVL
// since its last read from being credited at all, beyond the hold's wall
// time.
constexpr int64_t kShortHoldNs = 100000;
std::atomic<int64_t> g_held_cpu_ns{0};
std::atomic<int64_t> g_owner_resumed_ns{0};  // monotonic
std::atomic<int64_t> g_owner_cpu_read_ns{0};

// Per-thread state the hook keeps. initial-exec: static TLS, no lazy
// allocation on a thread's first access (general-dynamic TLS in a dlopen'd
// library allocates there), which the hook must not do.
__attribute__((tls_model("initial-exec"))) thread_local pid_t t_tid = 0;  // gettid is a syscall too
__attribute__((tls_model("initial-exec"))) thread_local int64_t t_resumed_ns = -1;  // -1: no hold measured
__attribute__((tls_model("initial-exec"))) thread_local int64_t t_cpu_read_ns = 0;  // 0: never read

pid_t MyTid() { return t_tid != 0 ? t_tid : (t_tid = CurrentTid()); }

// The caller holds the GVL from `now` on (monotonic): it is the owner, and
// the timer can add its hold so far.
void Resumed(pid_t me, int64_t now) {
  if (t_cpu_read_ns == 0) t_cpu_read_ns = ThreadCpuNs();  // once per thread
  t_resumed_ns = now;
  g_owner_resumed_ns.store(now, std::memory_order_relaxed);
  g_owner_cpu_read_ns.store(t_cpu_read_ns, std::memory_order_relaxed);
  g_owner.store(me, std::memory_order_release);
}

#ifdef HAVE_RB_INTERNAL_THREAD_ADD_EVENT_HOOK
rb_internal_thread_event_hook_t* g_hook = nullptr;

// Runs on the thread whose GVL state changes, with or without the GVL: no
// allocation, no Ruby. SUSPENDED clears the owner only if it is still the
// caller (the next owner's RESUMED may not have come yet, or may already
// have: compare-and-swap keeps the newer one).
void OnGvlEvent(rb_event_flag_t event, const rb_internal_thread_event_data_t*, void*) {
  if (!g_watching.load(std::memory_order_relaxed)) return;
  pid_t me = MyTid();
  int64_t now = MonotonicNs();
  if (event == RUBY_INTERNAL_THREAD_EVENT_RESUMED) {
    Resumed(me, now);
    return;
  }
  if (t_resumed_ns > 0 && now > t_resumed_ns) {
    int64_t credit = now - t_resumed_ns;
    if (credit >= kShortHoldNs) {
      int64_t cpu = ThreadCpuNs();
      if (t_cpu_read_ns > 0 && cpu > t_cpu_read_ns) credit = std::min(credit, cpu - t_cpu_read_ns);
      if (cpu > 0) t_cpu_read_ns = cpu;
    }
    g_held_cpu_ns.fetch_add(credit, std::memory_order_relaxed);
  }
  t_resumed_ns = -1;
  pid_t expected = me;
  g_owner.compare_exchange_strong(expected, 0, std::memory_order_relaxed);
}
#endif

// The caller holds the GVL: it is the owner from now, its hold measured
// from now (no RESUMED comes for a hold already under way).
void TakeOwnership() {
  t_cpu_read_ns = ThreadCpuNs();
  Resumed(MyTid(), MonotonicNs());
}

}  // namespace

bool Available() {
#ifdef HAVE_RB_INTERNAL_THREAD_ADD_EVENT_HOOK
  return true;
#else
  return false;
#endif
}

// In a forked child only the forking thread exists, and its cached id is
// the parent's: forget it (whether or not the sampler's own fork hook
// runs, which calls AfterForkChild only when profiling).
void ForgetTidInChild() { t_tid = 0; }

void Watch() {
  static bool atfork_registered = false;
  if (!atfork_registered) atfork_registered = pthread_atfork(nullptr, nullptr, ForgetTidInChild) == 0;
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
    // The hold so far, credited as SUSPENDED will credit it. Across a
    // handover the fields can be mismatched; the pacer keeps its highest
    // reading, so a low one only delays a tick.
    int64_t resumed = g_owner_resumed_ns.load(std::memory_order_relaxed);
    int64_t cpu_read = g_owner_cpu_read_ns.load(std::memory_order_relaxed);
    int64_t part = resumed > 0 ? MonotonicNs() - resumed : 0;
    if (part >= kShortHoldNs && cpu_read > 0) {
      int64_t cpu = ClockNs(ThreadCpuClock(owner));
      if (cpu > 0) part = std::min(part, cpu - cpu_read);
    }
    if (part > 0 && g_owner.load(std::memory_order_relaxed) == owner) held += part;
  }
  *held_ns = held;
  return owner;
}

void AfterForkChild() {
  t_tid = 0;  // the child's thread has its own id; the cached one is the parent's
  TakeOwnership();
}

}  // namespace GvlOwner
}  // namespace fathom
