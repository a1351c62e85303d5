// Ruby 3.3's M:N threads, and why the CPU/wall profiler refuses to run
// with them.
//
// With RUBY_MN_THREADS=1 (off by default for the main Ractor) Ruby threads
// other than the main one run on a pool of shared native threads and move
// between them. The sampler's timers are per native thread
// (SIGEV_THREAD_ID, cpu_sampler.cc), and a thread's slot goes at its
// THREAD_END, so the first worker to end on a shared native thread took
// that thread's timer with it: measured, 14 samples for ~450 ms of four
// workers' CPU, with nothing to say so. A profile that silently misses most
// threads is a wrong answer, so CpuSampler::Start refuses instead. Heap, GC
// and retention profiling do not depend on native threads and run.
//
// Ruby reads the variable once, at boot (thread_pthread.c,
// ruby_mn_threads_params: atoi(value) > 0, Ruby 3.3+) and keeps its answer
// private. The first call here reads it; InitCpuSampler makes that call
// when the extension loads, as close to boot as a library gets (a program
// that edits ENV["RUBY_MN_THREADS"] before requiring fathom misleads it).
#pragma once

#include <cstdlib>

#include <ruby/version.h>

namespace fathom {

inline bool MnThreadsOn() {
#if RUBY_API_VERSION_MAJOR * 100 + RUBY_API_VERSION_MINOR >= 303
  static const bool on = [] {
    const char* value = std::getenv("RUBY_MN_THREADS");
    return value != nullptr && std::atoi(value) > 0;
  }();
  return on;
#else
  return false;
#endif
}

inline constexpr const char* kMnThreadsRefusal =
  "Ruby's M:N threads are on (RUBY_MN_THREADS): Ruby threads share native threads there, and this profiler's "
  "per-thread timers cannot follow a Ruby thread from one native thread to another, so most threads would go "
  "unsampled. Unset RUBY_MN_THREADS to profile CPU or wall time; heap, GC and retention profiling work with it";

}  // namespace fathom
