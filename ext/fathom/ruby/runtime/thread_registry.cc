#include "ruby/runtime/thread_registry.h"

#include <sys/syscall.h>
#include <unistd.h>

#include "ruby/runtime/boundary.h"

namespace fathom {
namespace {

ID id_list, id_native_thread_id, id_alive_p;

// The listeners, in the order they came. Read and written only with the GVL
// held (the hooks run with it).
constexpr int kMaxListeners = 2;
const ThreadListener* g_listeners[kMaxListeners] = {};
bool g_hooks_added = false;

// THREAD_BEGIN / THREAD_END run on the thread itself: that is how the
// samplers learn the native ids of threads created after they started.
void ThreadBeginHook(rb_event_flag_t, VALUE, VALUE, ID, VALUE) {
  pid_t tid = CurrentTid();
  for (const ThreadListener* l : g_listeners)
    if (l != nullptr) NoThrow(l->begin_site, [l, tid] { l->on_begin(tid); });
}

void ThreadEndHook(rb_event_flag_t, VALUE, VALUE self, ID, VALUE) {
  pid_t tid = CurrentTid();
  for (const ThreadListener* l : g_listeners)
    if (l != nullptr) NoThrow(l->end_site, [l, tid, self] { l->on_end(tid, self); });
}

}  // namespace

pid_t CurrentTid() { return static_cast<pid_t>(syscall(SYS_gettid)); }

std::vector<pid_t> RubyThreadIds(bool alive_only) {
  std::vector<pid_t> tids;
  Protect([&tids, alive_only] {
    VALUE threads = rb_funcall(rb_cThread, id_list, 0);
    for (long i = 0; i < RARRAY_LEN(threads); i++) {
      VALUE th = RARRAY_AREF(threads, i);
      if (alive_only && !RTEST(rb_funcall(th, id_alive_p, 0))) continue;
      VALUE tid = rb_funcall(th, id_native_thread_id, 0);
      if (RB_INTEGER_TYPE_P(tid)) tids.push_back(static_cast<pid_t>(NUM2LL(tid)));
    }
  });
  return tids;
}

VALUE FindRubyThread(pid_t tid) {
  VALUE thread = Qnil;
  TryProtect([&] {
    VALUE threads = rb_funcall(rb_cThread, id_list, 0);
    for (long k = 0; k < RARRAY_LEN(threads); k++) {
      VALUE id = rb_funcall(RARRAY_AREF(threads, k), id_native_thread_id, 0);
      if (RB_INTEGER_TYPE_P(id) && NUM2LL(id) == tid) thread = RARRAY_AREF(threads, k);
    }
  });
  return thread;
}

void WatchThreads(const ThreadListener* listener) {
  const ThreadListener** free_slot = nullptr;
  for (const ThreadListener*& l : g_listeners) {
    if (l == listener) return;
    if (l == nullptr && free_slot == nullptr) free_slot = &l;
  }
  if (free_slot == nullptr) return;  // not reached: one listener per sampler
  *free_slot = listener;
  if (g_hooks_added) return;
  rb_add_event_hook(ThreadBeginHook, RUBY_EVENT_THREAD_BEGIN, Qnil);
  rb_add_event_hook(ThreadEndHook, RUBY_EVENT_THREAD_END, Qnil);
  g_hooks_added = true;
}

void UnwatchThreads(const ThreadListener* listener) {
  bool any = false;
  for (const ThreadListener*& l : g_listeners) {
    if (l == listener) l = nullptr;
    any = any || l != nullptr;
  }
  if (any || !g_hooks_added) return;
  rb_remove_event_hook(ThreadBeginHook);
  rb_remove_event_hook(ThreadEndHook);
  g_hooks_added = false;
}

void InitThreadRegistry() {
  id_list = rb_intern("list");
  id_native_thread_id = rb_intern("native_thread_id");
  id_alive_p = rb_intern("alive?");
}

}  // namespace fathom
