// Wall mode, Ruby 3.2+: a thread that releases the GVL (SUSPENDED) blocks
// SIGPROF until it wants the GVL back (READY). Otherwise our timer would
// interrupt its poll/ppoll with EINTR every interval, and Ruby would take
// the GVL to check interrupts before waiting again: the sampled thread would
// show as waiting for the GVL (it really would be) and steal GVL turns from
// busy threads. Blocked, its one-shot timer fires once and the signal stays
// pending; unblocked at READY, the handler runs at once, still in the
// blocked state, with the whole blocked time as the sample's wall delta.
//
// This is the set of native thread ids that have SIGPROF blocked by us
// (cpu_sampler.cc's GVL event hook adds and removes them). It is kept apart
// from the sampler's slots, so a thread still blocked when sampling stops is
// unblocked at its next READY (the GVL event hook stays installed once
// added). Lock-free and allocation-free: the hook runs without the GVL.
#pragma once

#include <cstdint>

namespace fathom {

// How many threads are in the set now.
int MaskedCount();
bool MaskedContains(int32_t tid);
// False when the set is full (the thread then stays unblocked).
bool MaskedAdd(int32_t tid);
// False when the thread was not in it.
bool MaskedRemove(int32_t tid);
// Blocks or unblocks SIGPROF on the calling thread.
void SetSigprofBlocked(bool blocked);

}  // namespace fathom
