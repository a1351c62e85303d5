// GvlOwner: the native thread that last took the GVL, from Ruby's GVL
// events (Ruby 3.2+, rb_internal_thread_add_event_hook; RESUMED runs on the
// thread that has just acquired the GVL, SUSPENDED on the one releasing it).
//
// Why the heap sampler needs it: on Ruby 3.3 rb_postponed_job_trigger,
// called from a thread Ruby does not know (our timer thread), flags the
// execution context in the main Ractor's `running_ec`. That field is not
// always the GVL holder: a thread that starts sets it to its own context
// before it waits for the GVL (ruby_thread_set_native), and the thread that
// takes the GVL back does not always reset it. With threads just created
// and parked (minitest's parallel executor, a puma pool) the job was flagged
// on a parked thread and ran when that thread woke up, if ever (issue 22:
// 0 samples in a minitest test). Called from a signal handler running on
// the GVL holder instead, the trigger flags the caller's own context, which
// is the right one. So the heap timer signals the owner recorded here.
//
// Signal-safe reads; the hook stores one int. On Ruby 3.1 (no GVL events)
// Available() is false and the timer keeps its round-robin (heap/heap_tick.cc).
#pragma once

#include <sys/types.h>

#include <cstdint>

namespace fathom {
namespace GvlOwner {

// Whether this Ruby has GVL events (3.2+).
bool Available();
// GVL held. Installs the hook once (kept for the process lifetime: while
// watching it costs a monotonic clock read and a few stores per GVL
// handover, and a CPU clock read at the end of a hold over 100 us) and
// records the caller, which holds the GVL now, as the owner.
void Watch();
// Sampling stopped: the hook stays installed (removing it while another
// thread may be inside it is not safe) but returns at once, costing a load
// per GVL handover. Watch() turns it on again.
void Unwatch();
// The owner's native thread id; 0 when no thread holds the GVL (all Ruby
// threads are blocked) or when unknown.
pid_t Current();
// The owner (as Current()) and, in *held_ns, the time spent holding the
// GVL on a CPU since the hook was installed (gvl_owner.cc says how each
// hold is credited): finished holds plus the owner's hold so far. Not signal-safe (reads another thread's CPU clock); the
// heap timer thread calls it.
pid_t HeldCpu(int64_t* held_ns);
// In a forked child: only the calling thread exists, and it holds the GVL.
void AfterForkChild();

}  // namespace GvlOwner
}  // namespace fathom
