// Fathom profiles the main Ractor only.
//
// Other Ractors run Ruby in parallel on their own threads, without the GVL
// the collectors rely on: a NEWOBJ hook firing on one of them would touch
// the sample store while the main Ractor does, which crashed exact mode
// and sampled mode at a 1 ms interval on 3.1. So every hook first asks
// OnMainRactor() and, on another Ractor, only notes that it saw one and
// returns. The Ruby layer refuses to start while Ractors run, and flushes
// report `other_ractors: true` (with a warning) when one started later:
// the profile then leaves out what those Ractors allocated or collected.
#pragma once

#include "ruby_private_api.h"

namespace fathom {

// True when the calling thread belongs to the main Ractor (always, in a
// process that never started another: then one load, no call, which matters
// for a hook that runs on every allocation). Reads a thread-local
// otherwise: safe in hooks.
inline bool OnMainRactor() {
#ifdef HAVE_RUBY_SINGLE_MAIN_RACTOR
  if (ruby_single_main_ractor != nullptr) return true;
#endif
#ifdef HAVE_RB_RACTOR_MAIN_P_
  return rb_ractor_main_p_();
#else
  return true;  // a Ruby that does not export it: hooks behave as before
#endif
}
// A hook fired on another Ractor. Lock-free, no allocation.
void NoteOtherRactor();
// Whether any hook has fired on another Ractor since the process started
// (Ractors cannot be un-started, so this never resets).
bool OtherRactorSeen();

}  // namespace fathom
