// PostponedJob: a function Ruby runs at its next safe point (GVL held,
// allocation allowed), asked for from where Ruby forbids both: an event
// hook, a GC hook, a signal handler.
//
// Ruby 3.3+ (rb_postponed_job_preregister found by have_func): the job is
// preregistered once (Ruby's table has 32 entries, for the process
// lifetime) and Trigger() calls rb_postponed_job_trigger, which any thread
// may call. Older Rubies: Trigger() calls rb_postponed_job_register_one,
// which only a Ruby thread may call (it flags the calling thread), and is
// deprecated on 3.3, hence never compiled there.
#pragma once

#include <ruby.h>
#include <ruby/debug.h>

namespace fathom {

class PostponedJob {
 public:
  // `func` must wrap its body in NoThrow (boundary.h): Ruby calls it.
  explicit constexpr PostponedJob(rb_postponed_job_func_t func) : func_(func) {}

  // Once, with the GVL, before the first Trigger (Init_fathom_ext).
  void Preregister();
  // Asks Ruby to run the job soon; several triggers before it runs make one
  // run. Async-signal-safe, no allocation. False if Ruby's queue was full.
  bool Trigger() const noexcept;
  // Whether Trigger may be called from a thread Ruby does not know (3.3+,
  // once preregistered).
  bool TriggersFromAnyThread() const;

 private:
  rb_postponed_job_func_t func_;
#ifdef HAVE_RB_POSTPONED_JOB_PREREGISTER
  rb_postponed_job_handle_t handle_ = POSTPONED_JOB_HANDLE_INVALID;
#endif
};

}  // namespace fathom
