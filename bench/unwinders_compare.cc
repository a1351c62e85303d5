// Which unwinder for native frames: a one-off comparison, not part of the
// build. Times one capture of a synthetic chain of DEPTH noinline frames
// (plus main's) with
//   - libgcc's _Unwind_Backtrace (what Fathom uses, core/native/native_capture.cc),
//   - libunwind's unw_backtrace and an unw_init_local/unw_step loop
//     (only with -DWITH_LIBUNWIND, needs Debian's libunwind-dev),
//   - a frame-pointer walk (the lower bound; this file is built with frame
//     pointers, which Debian's libruby and libz are not: see
//     FathomTest::NativeFrames.frame_pointer_depth for what it reaches there).
//
//   g++ -O2 -fno-omit-frame-pointer bench/unwinders_compare.cc -o /tmp/unw && /tmp/unw
//   g++ -O2 -fno-omit-frame-pointer -DWITH_LIBUNWIND bench/unwinders_compare.cc -lunwind -o /tmp/unw && /tmp/unw
#include <unwind.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <functional>

#ifdef WITH_LIBUNWIND
#define UNW_LOCAL_ONLY
#include <libunwind.h>
#endif

namespace {

constexpr int kMax = 256;
uintptr_t g_pcs[kMax];
volatile int g_sink;

struct State {
  int n;
};
_Unwind_Reason_Code OnFrame(_Unwind_Context* ctx, void* arg) {
  auto* s = static_cast<State*>(arg);
  int before = 0;
  g_pcs[s->n++] = _Unwind_GetIPInfo(ctx, &before);
  return s->n < kMax ? _URC_NO_REASON : _URC_END_OF_STACK;
}

int LibgccCapture() {
  State s{0};
  _Unwind_Backtrace(OnFrame, &s);
  return s.n;
}

#ifdef WITH_LIBUNWIND
int LibunwindBacktrace() { return unw_backtrace(reinterpret_cast<void**>(g_pcs), kMax); }
int LibunwindStep() {
  unw_context_t uc;
  unw_cursor_t cursor;
  unw_getcontext(&uc);
  unw_init_local(&cursor, &uc);
  int n = 0;
  while (n < kMax && unw_step(&cursor) > 0) {
    unw_word_t ip;
    unw_get_reg(&cursor, UNW_REG_IP, &ip);
    g_pcs[n++] = ip;
  }
  return n;
}
#endif

int FramePointerWalk() {
  auto* fp = static_cast<uintptr_t*>(__builtin_frame_address(0));
  int n = 0;
  while (fp && n < kMax) {
    auto* next = reinterpret_cast<uintptr_t*>(fp[0]);
    g_pcs[n++] = fp[1];
    if (next <= fp || reinterpret_cast<uintptr_t>(next) - reinterpret_cast<uintptr_t>(fp) > (1u << 20)) break;
    fp = next;
  }
  return n;
}

__attribute__((noinline)) int Chain(int depth, const std::function<int()>& capture) {
  if (depth == 0) return capture();
  int r = Chain(depth - 1, capture);
  g_sink = g_sink + 1;
  return r;
}

void Time(const char* name, int depth, const std::function<int()>& capture) {
  constexpr int kIterations = 20000;
  int frames = 0;
  Chain(depth, [&] {
    frames = capture();  // warm up
    auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < kIterations; ++i) frames = capture();
    auto t1 = std::chrono::steady_clock::now();
    double ns = std::chrono::duration<double, std::nano>(t1 - t0).count() / kIterations;
    printf("%-22s depth %3d: %4d frames, %8.0f ns/capture, %6.1f ns/frame\n", name, depth, frames, ns, ns / frames);
    return 0;
  });
}

}  // namespace

int main() {
  for (int depth : {20, 60, 120}) {
    Time("libgcc _Unwind_Backtrace", depth, LibgccCapture);
#ifdef WITH_LIBUNWIND
    Time("libunwind unw_backtrace", depth, LibunwindBacktrace);
    Time("libunwind unw_step", depth, LibunwindStep);
#endif
    Time("frame pointers", depth, FramePointerWalk);
  }
}
