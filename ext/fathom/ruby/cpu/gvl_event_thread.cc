#include "ruby/cpu/gvl_event_thread.h"

#ifdef HAVE_RB_INTERNAL_THREAD_ADD_EVENT_HOOK
#include <ruby/version.h>

namespace fathom {
namespace GvlEventThread {

// event_data->thread exists from Ruby 3.3 on (ruby/ruby#8885).
#if RUBY_API_VERSION_MAJOR * 100 + RUBY_API_VERSION_MINOR >= 303
namespace {
// The Ruby thread this native thread ran at its last RESUMED; Qfalse (never
// a Thread) before its first. initial-exec: static TLS, which a hook may
// touch without the lazy allocation of a dlopen'd library's dynamic TLS.
__attribute__((tls_model("initial-exec"))) thread_local VALUE t_running = Qfalse;
}  // namespace

void NoteResumed(const rb_internal_thread_event_data_t* data) {
  if (data != nullptr) t_running = data->thread;
}

void NoteRunning(VALUE thread) { t_running = thread; }

bool IsCallers(const rb_internal_thread_event_data_t* data) {
  // A Thread that moved under GC.compact since this thread's RESUMED reads
  // as another one here: that one event is dropped, the next RESUMED
  // records it again.
  return data == nullptr || t_running == Qfalse || data->thread == t_running;
}
#else
void NoteResumed(const rb_internal_thread_event_data_t*) {}
void NoteRunning(VALUE) {}
bool IsCallers(const rb_internal_thread_event_data_t*) { return true; }
#endif

}  // namespace GvlEventThread
}  // namespace fathom
#endif
