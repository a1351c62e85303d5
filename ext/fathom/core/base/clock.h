// Clock reads in nanoseconds (POSIX clock_gettime; no Ruby). Monotonic and
// realtime go through the vDSO (~20 ns); the thread CPU clock is a real
// syscall (~0.3 us), which matters inside hooks that run thousands of times
// per second.
#pragma once

#include <sys/resource.h>
#include <time.h>

#include <cstdint>

namespace fathom {

inline int64_t ClockNs(clockid_t clock) {
  struct timespec ts;
  if (clock_gettime(clock, &ts) != 0) return 0;
  return static_cast<int64_t>(ts.tv_sec) * 1000000000LL + ts.tv_nsec;
}

inline int64_t MonotonicNs() { return ClockNs(CLOCK_MONOTONIC); }
inline int64_t RealtimeNs() { return ClockNs(CLOCK_REALTIME); }
// CPU time of the calling thread; 0 when it cannot be read.
inline int64_t ThreadCpuNs() { return ClockNs(CLOCK_THREAD_CPUTIME_ID); }

// Voluntary context switches of the calling thread so far (it waited: for
// I/O, a lock, a timer, a signal), -1 when they cannot be read. A raw
// syscall that takes no lock: the CPU sampler's signal handler reads it in
// wall mode (SampleHeader::stayed_runnable).
inline int64_t ThreadVoluntarySwitches() {
  struct rusage usage;
  if (getrusage(RUSAGE_THREAD, &usage) != 0) return -1;
  return static_cast<int64_t>(usage.ru_nvcsw);
}

// Linux's CPU clock id for another thread of this process, by its kernel
// thread id (glibc's MAKE_THREAD_CPUCLOCK(tid, CPUCLOCK_SCHED); a stable
// kernel ABI). For the calling thread pthread_getcpuclockid gives the same
// value. Reading it for a thread that has exited fails: ClockNs gives 0.
inline clockid_t ThreadCpuClock(int tid) { return static_cast<clockid_t>((~static_cast<unsigned>(tid) << 3) | 6); }

}  // namespace fathom
