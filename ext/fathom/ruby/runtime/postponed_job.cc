#include "ruby/runtime/postponed_job.h"

namespace fathom {

void PostponedJob::Preregister() {
#ifdef HAVE_RB_POSTPONED_JOB_PREREGISTER
  if (handle_ == POSTPONED_JOB_HANDLE_INVALID) handle_ = rb_postponed_job_preregister(0, func_, nullptr);
#endif
}

bool PostponedJob::Trigger() const noexcept {
#ifdef HAVE_RB_POSTPONED_JOB_PREREGISTER
  if (handle_ == POSTPONED_JOB_HANDLE_INVALID) return false;
  rb_postponed_job_trigger(handle_);
  return true;
#else
  return rb_postponed_job_register_one(0, func_, nullptr) > 0;
#endif
}

bool PostponedJob::TriggersFromAnyThread() const {
#ifdef HAVE_RB_POSTPONED_JOB_PREREGISTER
  return handle_ != POSTPONED_JOB_HANDLE_INVALID;
#else
  return false;
#endif
}

}  // namespace fathom
