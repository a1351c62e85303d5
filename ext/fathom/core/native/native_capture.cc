#include "native/native_capture.h"

#include <dlfcn.h>
#include <ucontext.h>
#include <unwind.h>

#include <atomic>
#include <cstdlib>
#include <cstring>

namespace fathom {

namespace {

// ------------------------------------------------------------ libgcc

struct CaptureState {
  uintptr_t* out;
  size_t max;
  size_t count;
  // Frames still to skip before recording: with a ucontext, everything up to
  // the signal frame; without, CaptureNativePcs itself.
  bool from_signal;
  size_t skip;
};

_Unwind_Reason_Code OnFrame(struct _Unwind_Context* ctx, void* arg) {
  auto* s = static_cast<CaptureState*>(arg);
  // ip_before_insn is set for the frame a signal interrupted: libgcc marks
  // the context below the kernel's sigreturn trampoline (__restore_rt, whose
  // CFI glibc writes with the 'S' augmentation) as a signal frame, and its
  // IP is the interrupted instruction, not a return address. The handler's
  // own frames and the trampoline come before it and are skipped.
  int ip_before_insn = 0;
  uintptr_t ip = _Unwind_GetIPInfo(ctx, &ip_before_insn);
  if (ip == 0) return _URC_END_OF_STACK;
  if (s->from_signal) {
    if (!ip_before_insn) return _URC_NO_REASON;
    s->from_signal = false;
  } else if (s->skip > 0) {
    --s->skip;
    return _URC_NO_REASON;
  }
  s->out[s->count++] = ip_before_insn ? ip : ip - 1;
  return s->count < s->max ? _URC_NO_REASON : _URC_END_OF_STACK;
}

__attribute__((always_inline)) inline size_t CaptureWithLibgcc(uintptr_t* out, size_t max, const void* ucontext) {
  CaptureState s{out, max, 0, ucontext != nullptr, ucontext != nullptr ? size_t{0} : size_t{1}};
  _Unwind_Backtrace(OnFrame, &s);
  return s.count;
}

// ------------------------------------------------------------ libunwind

// unw_backtrace(void** buffer, int size): the one libunwind function used,
// with its stable C ABI (libunwind.h declares exactly this). Looked up with
// dlopen(RTLD_LOCAL) rather than linked: libunwind.so also exports the
// _Unwind_* functions, and linked in it could take over C++ exception
// unwinding from libgcc for the whole process. No -dev package is needed.
using UnwBacktrace = int (*)(void**, int);
std::atomic<UnwBacktrace> g_unw_backtrace{nullptr};

// Room for the handler's own frames (the handler, the sampler's dispatch,
// the trampoline) above the requested depth.
constexpr size_t kHandlerFrames = 8;
constexpr size_t kLocalFrames = 256 + kHandlerFrames;

uintptr_t InterruptedPc(const void* ucontext) {
  const auto* uc = static_cast<const ucontext_t*>(ucontext);
#if defined(__x86_64__)
  return static_cast<uintptr_t>(uc->uc_mcontext.gregs[REG_RIP]);
#elif defined(__aarch64__)
  return static_cast<uintptr_t>(uc->uc_mcontext.pc);
#else
#error "fathom: native frames need the interrupted PC of this architecture"
#endif
}

__attribute__((always_inline)) inline size_t CaptureWithLibunwind(UnwBacktrace backtrace, uintptr_t* out, size_t max, const void* ucontext) {
  // Captured from here (it skips its own frame), through the signal frame
  // when in a handler. On the stack: 2 KiB at most.
  void* local[kLocalFrames];
  size_t want = max + (ucontext != nullptr ? kHandlerFrames : 1);
  if (want > kLocalFrames) want = kLocalFrames;
  int got = backtrace(local, static_cast<int>(want));
  if (got <= 0) return 0;
  auto n = static_cast<size_t>(got);
  size_t first = 1;  // without a ucontext: skip CaptureNativePcs itself
  if (ucontext != nullptr) {
    // The interrupted frame is the one whose PC is exactly the ucontext's
    // (libunwind reports a signal frame's PC unadjusted).
    uintptr_t pc = InterruptedPc(ucontext);
    first = n;
    for (size_t i = 0; i < n; ++i) {
      if (reinterpret_cast<uintptr_t>(local[i]) == pc) {
        first = i;
        break;
      }
    }
    if (first == n) return 0;  // never saw the signal frame: nothing we trust
  }
  size_t count = 0;
  for (size_t i = first; i < n && count < max; ++i) {
    auto pc = reinterpret_cast<uintptr_t>(local[i]);
    if (pc == 0) break;
    bool interrupted = ucontext != nullptr && i == first;
    out[count++] = interrupted ? pc : pc - 1;
  }
  return count;
}

UnwBacktrace LoadLibunwind() {
  // Already loaded (a previous Init, or linked by someone else): no new
  // dlopen side effects. RTLD_LOCAL keeps its symbols out of global lookup.
  void* lib = dlopen("libunwind.so.8", RTLD_NOW | RTLD_LOCAL);
  if (lib == nullptr) return nullptr;
  return reinterpret_cast<UnwBacktrace>(dlsym(lib, "unw_backtrace"));  // never dlclosed
}

}  // namespace

NativeUnwinder InitNativeCapture(bool use_libunwind) {
  const char* forced = getenv("FATHOM_NATIVE_UNWINDER");
  if (forced != nullptr && strcmp(forced, "libgcc") == 0) use_libunwind = false;
  if (forced != nullptr && strcmp(forced, "libunwind") == 0) use_libunwind = true;
  UnwBacktrace bt = use_libunwind ? LoadLibunwind() : nullptr;
  g_unw_backtrace.store(bt, std::memory_order_release);
  uintptr_t pcs[4];
  CaptureNativePcs(pcs, 4, nullptr);  // warms up whichever is used
  return bt != nullptr ? NativeUnwinder::kLibunwind : NativeUnwinder::kLibgcc;
}

const char* NativeUnwinderName() {
  return g_unw_backtrace.load(std::memory_order_acquire) != nullptr ? "libunwind" : "libgcc";
}

// noinline: "skip one frame" must mean this function, whatever the caller.
__attribute__((noinline)) size_t CaptureNativePcs(uintptr_t* out, size_t max, const void* ucontext) {
  if (out == nullptr || max == 0) return 0;
  UnwBacktrace bt = g_unw_backtrace.load(std::memory_order_acquire);
  size_t n = bt != nullptr ? CaptureWithLibunwind(bt, out, max, ucontext) : CaptureWithLibgcc(out, max, ucontext);
  // Keeps this frame from being turned into a tail call, which would make
  // the skipped frame the caller's.
  __asm__ __volatile__("" ::: "memory");
  return n;
}

}  // namespace fathom
