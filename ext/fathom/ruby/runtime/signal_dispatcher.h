// SIGPROF has one handler in Fathom, shared by its two users, which
// register with it at extension load (this file knows neither):
//   - the per-thread timer route: the CPU/wall sampler's POSIX timers
//     (timer_create, SIGEV_THREAD_ID), si_code SI_TIMER with kTimerSignalTag
//     in si_value (cpu/cpu_sampler.cc);
//   - the directed route, every other SIGPROF: the heap profiler's tick on
//     Ruby < 3.3 sends one with tgkill from its timer thread, si_code
//     SI_TKILL (heap/heap_tick.cc).
// The dispatcher tells them apart by si_code and the tag, so both can run
// at once. It is installed on first use and never removed: a signal we
// caused can still be pending after stop, and under SIG_DFL it would kill
// the process. A SIGPROF handler that is not ours (stackprof, vernier, a
// previous setitimer user) makes installation fail with a clear message.
#pragma once

#include <signal.h>

#include <cstdint>
#include <string>

namespace fathom {

// si_value.sival_int of a per-thread timer: kTimerSignalTag << 16 | slot.
constexpr int kTimerSignalTag = 0x4654;  // "FT"

// Both run in the signal handler: async-signal-safe, no allocation, no
// Ruby. ucontext: the handler's third argument.
using TimerSignalHandler = void (*)(int slot, const void* ucontext);
using DirectedSignalHandler = void (*)(int sig, siginfo_t* info, void* ucontext);
// Called once each at extension load, before the dispatcher can be
// installed. A route with no handler forwards to the previous one.
void SetTimerSignalHandler(TimerSignalHandler handler);
void SetDirectedSignalHandler(DirectedSignalHandler handler);

// Installs the dispatcher once; false with a message if SIGPROF belongs to
// someone else. Call with the GVL held.
bool InstallSigprofHandler(std::string* error);
// Calls the handler that was installed before ours, if it was a function
// (only possible when it was installed after ours was refused... kept for
// the heap tick's disabled path).
void ForwardSigprofToPrevious(int sig, siginfo_t* info, void* ucontext);

}  // namespace fathom
