// The Ruby threads, seen once for both samplers (the heap tick and the CPU
// sampler): who the calling thread is, which threads are alive now, and the
// one pair of THREAD_BEGIN / THREAD_END hooks that tell each registered
// listener about the threads that start and end while it listens.
//
// What a sampler keeps about a thread stays with it (the heap tick's list of
// threads to signal, the CPU sampler's per-thread timer slots): only the
// hooks, the thread ids and their dispatch are shared. The signal side is
// runtime/signal_dispatcher.h. Like vernier's ThreadTable beside its
// GlobalSignalHandler, this file knows no sampler: they register with it.
#pragma once

#include <sys/types.h>

#include <vector>

#include <ruby.h>

namespace fathom {

// The calling thread's native id (gettid). A syscall: async-signal-safe,
// right in a forked child, no allocation.
pid_t CurrentTid();

// Native ids of the threads in Thread.list (only the alive? ones if
// alive_only). Calls Ruby, under Protect: a Ruby exception propagates (as
// the boundary's C++ exception), before the caller changed any state.
std::vector<pid_t> RubyThreadIds(bool alive_only);

// The Thread whose native id is tid, or nil (also if Thread.list raised).
VALUE FindRubyThread(pid_t tid);

// Callbacks run by the THREAD_BEGIN / THREAD_END hooks, on the thread that
// begins or ends, with the GVL: they may allocate C++ memory, not raise
// (each runs under NoThrow with its site name).
struct ThreadListener {
  const char* begin_site;
  const char* end_site;
  void (*on_begin)(pid_t tid);
  void (*on_end)(pid_t tid, VALUE thread);
};

// GVL held. The first listener adds the hooks, the last one to go removes
// them; a listener already there is not added twice. Listeners are static
// objects (one per sampler); at most two at once.
void WatchThreads(const ThreadListener* listener);
void UnwatchThreads(const ThreadListener* listener);

void InitThreadRegistry();

}  // namespace fathom
