// One sampled thread's slot in the CPU/wall sampler (cpu_sampler.cc): its
// timer, its state from the GVL events, and what its previous sample left
// for the next one. Shared by the signal handler, the GVL event hook and
// the GVL holder, hence the atomics; the plain fields are written by one of
// them at a time, as each says.
#pragma once

#include <time.h>

#include <atomic>
#include <cstdint>

#include "cpu/sample_ring.h"

namespace fathom {

// How many Ruby threads can be sampled at once. Slots are preallocated so
// the handler and the GVL hooks never allocate; a thread beyond this is
// not sampled (counted in stats as threads_seen - sampled).
constexpr int kMaxThreads = 1024;

struct ThreadSlot {
  std::atomic<int32_t> tid{0};         // 0: free
  std::atomic<bool> active{false};     // the handler may sample
  std::atomic<bool> busy{false};       // the handler is running on this slot
  std::atomic<uint8_t> state{static_cast<uint8_t>(ThreadState::kRunning)};  // from GVL events
  // Wall mode, 3.2+: a thread that was outside Ruby code when sampling
  // started, whose timer is not armed yet: its first GVL event takes its
  // first sample (covering the wait) and arms it. Signalling it instead
  // would interrupt its ppoll/read with EINTR, and it would wait for the GVL
  // to check interrupts before waiting again (as SIGPROF blocking does for
  // threads that block later: masked_threads.h).
  std::atomic<bool> dormant{false};
  // 3.2+: GVL RESUMED events on this thread (its own hook counts them),
  // the count at its previous sample and whether it was off the GVL then:
  // it ran no Ruby code in between iff it was and the count has not moved
  // (SampleHeader::gvl_since_previous). Handler and hook only, on the
  // thread itself, once active.
  std::atomic<uint32_t> resumes{0};
  uint32_t resumes_at_sample = 0;
  bool off_gvl_at_sample = false;
  // 3.2+: a sample of it was taken during a GC, with no stack read: its
  // next RESUMED reads the stack it waited in (TakeStackProbe). Set by the
  // handler, taken by the hook, both on the thread: atomic for the signal.
  std::atomic<bool> probe_at_resume{false};
  timer_t timer{};
  bool has_timer = false;              // GVL only
  // Handler-only once active (set before, with the GVL).
  int64_t last_cpu_ns = 0;
  int64_t last_wall_ns = 0;
  uint64_t rng = 0;
  // Wall mode: the thread's voluntary context switches at its previous
  // sample (getrusage RUSAGE_THREAD), -1 before its first (a slot is set up
  // from another thread, which cannot read this one's).
  int64_t last_voluntary_switches = -1;
  // The thread's labels at its last sample, for the last sample
  // AccountBlockedThreads takes for it from another thread (whose own
  // thread-locals are not the sampled thread's). A thread outside Ruby
  // code since then has not changed them.
  CpuLabels last_labels;

  // Whether the thread ran no Ruby code since its previous sample (3.2+),
  // and, with `update`, the baseline for its next one. `now`: its state now.
  GvlSincePrevious GvlSince(ThreadState now, bool update) {
    uint32_t count = resumes.load(std::memory_order_relaxed);
    bool stayed = off_gvl_at_sample && count == resumes_at_sample;
    if (update) {
      resumes_at_sample = count;
      off_gvl_at_sample = now != ThreadState::kRunning && now != ThreadState::kUnknown;
    }
    return stayed ? GvlSincePrevious::kNotTaken : GvlSincePrevious::kTaken;
  }
};

}  // namespace fathom
