// SIGPROF has one handler in Fathom, shared by its two users:
//   - SampleTimer (the heap profiler's tick on Ruby < 3.3): tgkill from its
//     timer thread, si_code SI_TKILL;
//   - CpuSampler (the CPU/wall profiler): per-thread POSIX timers
//     (timer_create, SIGEV_THREAD_ID), si_code SI_TIMER with our tag in
//     si_value.
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

// si_value.sival_int of a CpuSampler timer: kCpuTimerTag << 16 | slot.
constexpr int kCpuTimerTag = 0x4654;  // "FT"

// Installs the dispatcher once; false with a message if SIGPROF belongs to
// someone else. Call with the GVL held.
bool InstallSigprofHandler(std::string* error);
// Calls the handler that was installed before ours, if it was a function
// (only possible when it was installed after ours was refused... kept for
// the SampleTimer's disabled path).
void ForwardSigprofToPrevious(int sig, siginfo_t* info, void* ucontext);

}  // namespace fathom
