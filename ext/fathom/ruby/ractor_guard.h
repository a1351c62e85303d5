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

namespace fathom {

// True when the calling thread belongs to the main Ractor (always, in a
// process that never started another). Reads a thread-local: safe in hooks.
bool OnMainRactor();
// A hook fired on another Ractor. Lock-free, no allocation.
void NoteOtherRactor();
// Whether any hook has fired on another Ractor since the process started
// (Ractors cannot be un-started, so this never resets).
bool OtherRactorSeen();

}  // namespace fathom
