// Signal-safe capture of the native (C/C++) call stack as raw program
// counters. Symbolizing them (native_symbolizer.h) and weaving them into the
// Ruby stack (stack_weaver.h) happen later, off the signal path.
//
// Two unwinders, both reading the DWARF call-frame information (.eh_frame)
// every object carries: Debian builds libruby, libz, libc and the C
// extensions with -O2 and without frame pointers, so a frame-pointer walk
// loses the chain in the first such function.
//   - libgcc's _Unwind_Backtrace (the default, always there): parses the
//     CFI again for every frame, ~300 ns a frame, but allocates nothing,
//     uses no thread-local storage and finds objects with glibc's lock-free
//     _dl_find_object: safe in any signal handler on any thread;
//   - libunwind's unw_backtrace (Debian's libunwind8, opt-in with
//     FATHOM_NATIVE_UNWINDER=libunwind): caches each PC's frame layout per
//     thread, ~15 ns a frame once warm, but that cache hangs off a
//     thread-local variable, and loaded with dlopen its TLS is dynamic: the
//     first capture on each thread calls malloc (inside __tls_get_addr),
//     which deadlocks when the signal interrupted malloc. Seen in the CPU
//     sampler's crash test on Ruby 3.3.8. Safe only when libunwind.so.8 is
//     loaded at process start (LD_PRELOAD), which makes its TLS static.
// docs/internals/native.md ("C frames") has the figures and the signal-safety
// argument for each.
#pragma once

#include <cstddef>
#include <cstdint>

namespace fathom {

enum class NativeUnwinder { kLibunwind, kLibgcc };

// Call once outside any signal handler, before the first capture (e.g. when
// the profiler starts): picks the unwinder (libgcc's, unless
// `use_libunwind` or FATHOM_NATIVE_UNWINDER=libunwind asks for libunwind
// and it loads; FATHOM_NATIVE_UNWINDER=libgcc overrides `use_libunwind`)
// and runs it once so that its one-time initialisation (dlopen, pthread_once
// in either library, lazy binding) never happens inside a handler. May be
// called again to switch (not while a handler may capture).
NativeUnwinder InitNativeCapture(bool use_libunwind = false);

// The unwinder in use: "libunwind" or "libgcc".
const char* NativeUnwinderName();

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
