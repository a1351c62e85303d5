// SampleTimer: wakes up every interval and gets a postponed job run on the
// Ruby thread that holds the GVL, without the job ever being in a hook.
//
// Why a native thread plus a signal: in Ruby 3.1 a postponed job can only be
// registered from a Ruby thread (rb_postponed_job_register_one reads the
// calling thread's execution context and flags *that* thread), so a timer
// thread cannot register it directly; it sends SIGPROF to one Ruby thread
// (tgkill) and the handler registers the job. Only the GVL holder runs Ruby
// code soon, so the handler checks ruby_thread_has_gvl_p(): on a miss it
// records it and the timer moves to the next known Ruby thread at the next
// tick. Threads are learned at start (Thread.list) and from THREAD_BEGIN/END
// events. On Ruby 3.3+ (rb_postponed_job_preregister found by have_func) the
// timer thread triggers a preregistered job directly instead, with no signal
// (postponed_job.h). See IMPLEMENTATION.md, "Sampled mode".
//
// The timer also owns what exists only for it: the "hook armed" flag, the
// fork hooks (Fathom::Native.before_fork / after_fork_parent) and the
// THREAD_BEGIN/END hooks that tell it which threads to signal.
#pragma once

#include <signal.h>
#include <sys/types.h>

#include <atomic>
#include <cstdint>
#include <string>

#include <ruby.h>

namespace fathom {

class PostponedJob;

class SampleTimer {
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
  // The SIGPROF dispatcher (sigprof.h) calls this for every SIGPROF that
  // is not a CpuSampler timer's. Async-signal-safe.
  static void OnSignal(int sig, siginfo_t* info, void* ucontext);

  struct Stats {
    uint64_t ticks, signals_sent, handler_misses, jobs_registered;
  };
  static Stats stats();
  // How ticks reach Ruby: "signal" (SIGPROF to the GVL holder, Ruby < 3.3)
  // or "trigger" (rb_postponed_job_trigger from the timer thread, 3.3+).
  static const char* mechanism();
};

// Defines Fathom::Native.before_fork / after_fork_parent (called by
// lib/fathom/fork_hooks.rb around Process._fork).
void InitSampleTimer(VALUE mNative);

}  // namespace fathom
