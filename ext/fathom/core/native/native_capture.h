// Signal-safe capture of the native (C/C++) call stack as raw program
// counters. Symbolizing them (native_symbolizer.h) and weaving them into the
// Ruby stack (stack_weaver.h) happen later, off the signal path.
//
// The unwinder is libgcc's _Unwind_Backtrace, reading the DWARF call-frame
// information (.eh_frame) every object carries: Debian builds libruby, libz,
// libc and the C extensions with -O2 and without frame pointers, so a
// frame-pointer walk loses the chain in the first such function.
// IMPLEMENTATION.md ("C frames") says why this is safe in a signal handler on
// Debian 12 (GCC 12's libgcc finds unwind tables with glibc's lock-free
// _dl_find_object) and what it costs.
#pragma once

#include <cstddef>
#include <cstdint>

namespace fathom {

// Call once outside any signal handler (e.g. when the profiler starts): runs
// the unwinder once so that its one-time initialisation (pthread_once in
// libgcc, the lazy binding of _Unwind_* and _dl_find_object) never happens
// inside a handler.
void InitNativeCapture();

// Writes up to `max` program counters of the calling thread's native stack
// into `out`, innermost first, and returns how many were written.
//
// With `ucontext` (the third argument of an SA_SIGINFO handler) the stack is
// that of the interrupted code: the first PC is the exact interrupted
// instruction, the handler's own frames are skipped. Without it, the stack of
// the caller of CaptureNativePcs (first PC: inside the caller).
//
// Every PC but the interrupted one is a return address minus one, so that it
// falls inside the calling instruction (and the calling function, even when
// the call was the function's last instruction).
//
// Async-signal-safe: no malloc, no locks of its own, no Ruby. Stops early at
// an object without unwind information (e.g. JIT code) or a corrupt frame.
size_t CaptureNativePcs(uintptr_t* out, size_t max, const void* ucontext);

}  // namespace fathom
