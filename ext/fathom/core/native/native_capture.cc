#include "native/native_capture.h"

#include <unwind.h>

namespace fathom {

namespace {

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

}  // namespace

void InitNativeCapture() {
  uintptr_t pcs[4];
  CaptureNativePcs(pcs, 4, nullptr);
}

// noinline: "skip one frame" must mean this function, whatever the caller.
__attribute__((noinline)) size_t CaptureNativePcs(uintptr_t* out, size_t max, const void* ucontext) {
  if (out == nullptr || max == 0) return 0;
  CaptureState s{out, max, 0, ucontext != nullptr, ucontext != nullptr ? size_t{0} : size_t{1}};
  _Unwind_Backtrace(OnFrame, &s);
  // Keeps this frame from being turned into a tail call, which would make
  // the skipped frame the caller's.
  __asm__ __volatile__("" ::: "memory");
  return s.count;
}

}  // namespace fathom
