// Whether a GVL event (READY / RESUMED / SUSPENDED) is about the native
// thread its hook runs on. The CPU sampler keeps a thread's state in a slot
// found by the calling thread's id (cpu_sampler.cc, ThreadEventHook), so an
// event about another thread must not touch the caller's slot.
//
// Ruby says since 3.3 that thread event hooks may run on a native thread
// other than the one of the Ruby thread an event is about, and passes that
// Ruby thread in event_data->thread (ruby/ruby#8885, and #9029: "callbacks
// are no longer guaranteed to be triggered from the associated native
// thread"). RESUMED runs on the thread itself, with the GVL. READY notably
// does not on Ruby 4.0 (DataDog's profiler, dd-trace-rb commit 1c5cdba,
// on_gvl_event): taken as the caller's, another thread's READY would mark
// the caller as waiting for the GVL while it runs, and in wall mode would
// unblock its SIGPROF. A SUSPENDED taken as the caller's would block it.
//
// So RESUMED records, per native thread, the Ruby thread it runs, and any
// other event counts as the caller's only if it names that thread, or if
// none was recorded yet (a native thread's first events, READY at thread
// start, which 3.3 and 3.4 fire on the thread itself). An event dropped
// here leaves the state the thread had: its wait counts as blocked, not as
// another thread's. Ruby 3.2 passes no thread and fires every event on the
// thread itself: everything is the caller's there. Async-signal-safe and
// lock-free: one initial-exec thread-local, no allocation, no Ruby.
#pragma once

#include <ruby.h>
#ifdef HAVE_RB_INTERNAL_THREAD_ADD_EVENT_HOOK
#include <ruby/thread.h>

namespace fathom {
namespace GvlEventThread {

// At RESUMED, on the thread itself: remember which Ruby thread this native
// thread runs.
void NoteResumed(const rb_internal_thread_event_data_t* data);
// The same for the GVL holder when the hook is added: it may hold the GVL
// since before, with no RESUMED to come before it wakes another thread.
void NoteRunning(VALUE thread);
// Whether a READY or SUSPENDED is about the calling native thread.
bool IsCallers(const rb_internal_thread_event_data_t* data);

}  // namespace GvlEventThread
}  // namespace fathom
#endif
