// CpuSampler: the signal side of the CPU/wall profiler. Every Ruby thread
// gets its own POSIX timer (timer_create) that delivers SIGPROF to that
// very thread (SIGEV_THREAD_ID), on that thread's CPU clock in CPU mode or
// on CLOCK_MONOTONIC in wall mode. The thread samples itself in the handler:
//   - rb_profile_frames() walks the calling thread's own control frames
//     (GET_EC() is a thread-local), so sleeping, blocked and GVL-waiting
//     threads are sampled too, with the stack they had when they released
//     the GVL, on every Ruby from 3.1 (no rb_profile_thread_frames needed);
//   - its CPU clock (CLOCK_THREAD_CPUTIME_ID) and CLOCK_MONOTONIC are read
//     and the deltas since that thread's previous sample recorded, so the
//     totals are the threads' true CPU and wall time, whatever the tick;
//   - the thread's state comes from the GVL events (Ruby 3.2+,
//     rb_internal_thread_add_event_hook) or, on 3.1, from whether the thread
//     is inside a blocking region (ruby_thread_has_gvl_p).
// The handler writes one record into a preallocated SampleRing, re-arms its
// one-shot timer with a jittered interval, and asks for the drain job. No
// allocation, no Ruby object is created, no lock.
//
// Threads are learned from Thread.list at start and from THREAD_BEGIN /
// THREAD_END hooks (which run on the thread itself, with the GVL), both
// through the thread registry (runtime/thread_registry.h); the signal comes
// through the dispatcher's timer route (runtime/signal_dispatcher.h).
#pragma once

#include <cstdint>
#include <string>

#include <ruby.h>

#include "cpu/cpu_profile.h"
#include "cpu/sample_ring.h"

namespace fathom {

class PostponedJob;

class CpuSampler {
 public:
  struct Config {
    CpuMode mode = CpuMode::kCpu;
    int64_t interval_ns = 10000000;
    // Capture C frames into the ring's native arrays (native: true); the
    // ring must have been made with native_max > 0.
    bool native = false;
  };
  // Called (GVL held) when a sampled thread ends, so its name can be kept.
  using ThreadEndCallback = void (*)(int32_t thread_id, VALUE thread);

  // GVL held. False with a message if SIGPROF is not ours to use or no
  // timer could be created. Only one sampler runs per process.
  static bool Start(SampleRing* ring, const Config& config, const PostponedJob* drain_job, ThreadEndCallback on_end,
                    std::string* error);
  // GVL held. When it returns, no handler is writing into the ring and
  // none will (pending signals find the sampler off and return).
  // account_blocked (wall mode; not at exit or in GC free, where Ruby must
  // not be called): threads blocked right now get a last sample for the
  // time since their previous one.
  static void Stop(bool account_blocked = false);
  static bool running();
  // In a forked child (timers are not inherited; only the forking thread
  // exists): samples that thread alone.
  static void AfterForkChild();
  // internal: the calling thread (one of Fathom's own helper threads) is
  // not sampled by this or any later start, until it calls this with false
  // as it ends. GVL held.
  static void SetCurrentThreadInternal(bool internal);

  // From the SIGPROF dispatcher's timer route (runtime/signal_dispatcher.h),
  // and from the GVL event hook for a dormant thread's first sample.
  // Async-signal-safe.
  // ucontext: the handler's third argument (C frames start there).
  static void OnSignal(int slot, const void* ucontext);

  struct Stats {
    uint64_t signals, samples, threads_seen, timer_errors, foreign_signals;
    int threads_now;
  };
  static Stats stats();
  // "thread-events" (Ruby 3.2+) or "gvl-flag" (3.1).
  static const char* state_source();
};

void InitCpuSampler();

}  // namespace fathom
