// HeapTick: wakes up every interval and gets a postponed job run on the
// Ruby thread that holds the GVL, without the job ever being in a hook.
//
// Why a native thread plus a signal: a postponed job runs on the thread
// whose execution context is flagged, and only the GVL holder runs Ruby code
// soon. In Ruby 3.1 rb_postponed_job_register_one flags the *calling*
// thread, so a timer thread cannot register it; it sends SIGPROF to one
// Ruby thread (tgkill) and the handler registers the job. On 3.1 the timer
// cannot know the GVL holder: the handler checks ruby_thread_has_gvl_p(),
// and on a miss the timer moves to the next known Ruby thread (learned at
// start from Thread.list and from THREAD_BEGIN/END events). On 3.2+ the GVL
// events name the holder (gvl_owner.h) and the signal goes straight to it.
// On 3.3 the timer thread could trigger a preregistered job itself, but
// Ruby then flags a context that is not always the GVL holder's, and ticks
// were lost whenever other threads existed (gvl_owner.h): that path is only
// the fallback when SIGPROF belongs to another profiler. See
// docs/internals/heap.md, "Sampled mode".
//
// The timer also owns what exists only for it: the "hook armed" flag, the
// fork hooks (Fathom::Native.before_fork / after_fork_parent) and the list
// of threads to signal, kept by its listener on the thread registry's
// THREAD_BEGIN/END hooks (runtime/thread_registry.h). Its SIGPROF comes
// through the dispatcher's directed route (runtime/signal_dispatcher.h).
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <string>

#include <ruby.h>

namespace fathom {

class PostponedJob;

class HeapTick {
 public:
  // Starts the timer thread. `job` runs (with the GVL, at a safe point) on
  // each tick unless `hook_armed` says there is no need (a sample is already
  // on its way). Returns false with a message on failure (no thread could be
  // created, or SIGPROF is owned by someone else). Learns the Ruby threads
  // (Thread.list, then THREAD_BEGIN/END hooks) first.
  static bool Start(uint64_t interval_ns, const PostponedJob* job, std::string* error);
  // Stops the timer thread and (unless told not to: at VM shutdown, when
  // the hooks are left inert) the thread hooks.
  static void Stop(bool unwatch_threads = true);
  // Around fork: the timer thread is joined before fork (so it holds no
  // lock, ours or the allocator's, when the process is copied) and started
  // again after it, in the parent and, knowing only the forking thread, in
  // the child.
  static void PauseForFork();
  static void ResumeAfterForkParent();
  static void AfterForkChild();


  // Set by the collector: while true, ticks are skipped (the allocation hook
  // is armed and waiting, no need to arm it again).
  static std::atomic<bool> hook_armed;
  // Set by the collector's job when it ran: lets the timer know a tick's
  // job is no longer outstanding.
  static void JobRan();
  // The calling thread holds the GVL and runs Ruby code (the job, a burst's
  // last sample): Ruby 3.1's timer paces its ticks by this thread's CPU
  // time and signals it first. One gettid and a store: hook-safe.
  static void NoteRunner();

  // Cumulative since the process started (a window's share is the
  // difference between two reads).
  struct Stats {
    uint64_t ticks, signals_sent, handler_misses, jobs_registered;
    uint64_t jobs_run;     // the job ran (each run arms a burst unless one is armed)
    uint64_t armed_skips;  // ticks skipped: the burst of an earlier tick still waits for an allocation
    uint64_t idle_ticks;   // ticks skipped: no thread held the GVL (3.2+)
  };
  static Stats stats();
  // How ticks reach Ruby: "signal" (SIGPROF round-robin over Ruby threads
  // until one holds the GVL, Ruby 3.1), "gvl-owner" (SIGPROF to the thread
  // that last took the GVL, 3.2+), or "trigger" (rb_postponed_job_trigger
  // from the timer thread, 3.3+ when SIGPROF belongs to another profiler).
  static const char* mechanism();
};

}  // namespace fathom
