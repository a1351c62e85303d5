// A test-only extension (test/support/native_frames.rb builds it; never part
// of the gem): the C-frame machinery of ext/fathom/core/native/ called from
// Ruby, for the tests and bench/native_capture.rb. Its module functions,
// under FathomTest::NativeFrames:
//
//   unwinder             -> "libunwind" or "libgcc" (native_capture.h;
//                           FATHOM_NATIVE_UNWINDER=libgcc forces it)
//   frame_pointer_depth  -> [frames a frame-pointer walk reaches,
//                           frames the unwinder reaches]
//   symbolize(name)      -> [function, object] of dlsym(name), or nil
//   native_stack         -> [[function, object], ...] of the calling
//                           thread's native stack, innermost first
//   capture_cost(n)      -> [ns per capture, native depth,
//                           ns per rb_profile_frames, Ruby depth]:
//                           n captures of the current stack, timed
//   sample_native(interval_us) { block }
//                        -> samples taken by a per-thread CPU timer
//                           signal while the block runs, each
//                           {native: [[fn, obj]...] innermost first,
//                            ruby: [[label, cfunc?]...] outermost
//                            first, woven: [name...] outermost first}
//
// sample_native is a miniature of what the CPU sampler does: in the
// handler, CaptureNativePcs from the ucontext and rb_profile_frames (reads
// the thread's own frames, allocates nothing) into preallocated slots; after
// the block, with the GVL, symbolize and weave. GC is disabled while the
// block runs so that the frame handles stay valid until they are named (the
// real sampler keeps its handles alive its own way); if a GC ran anyway
// (GC.start, GC.compact) it raises Fathom::Error instead.
//
// It compiles its own copy of the sources it uses (extconf.rb), the
// binding's doors (ruby/runtime/boundary.h) among them.
#include <ruby.h>
#include <ruby/debug.h>

#include <dlfcn.h>
#include <errno.h>
#include <signal.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "ruby/native_class.h"
#include "ruby/runtime/boundary.h"
#include "ruby/runtime/symbols.h"
#include "native/native_capture.h"
#include "native/native_stack_resolver.h"

namespace fathom {

namespace {

constexpr size_t kMaxRubyFrames = 256;
constexpr size_t kMaxSamples = 2048;

struct DebugSample {
  size_t native_depth;
  int ruby_depth;
  uintptr_t pcs[kMaxNativeFrames];
  VALUE frames[kMaxRubyFrames];
  int lines[kMaxRubyFrames];
};

// Shared with the handler: the slots are allocated before the timer starts
// and freed after it is deleted.
std::atomic<DebugSample*> g_slots{nullptr};
std::atomic<size_t> g_next{0};
std::atomic<bool> g_sampling{false};
bool g_handler_installed = false;

// A real-time signal no Ruby (3.1-3.4) uses, so as not to meet the heap
// sampler's SIGPROF. The handler stays installed (a no-op when idle): a
// signal still queued when sampling stops must not meet SIG_DFL (which for
// a real-time signal kills the process).
int DebugSignal() { return SIGRTMIN + 3; }

void OnDebugSignal(int, siginfo_t*, void* ucontext) {
  int saved_errno = errno;
  DebugSample* slots = g_slots.load(std::memory_order_acquire);
  if (g_sampling.load(std::memory_order_acquire) && slots != nullptr) {
    size_t i = g_next.fetch_add(1, std::memory_order_relaxed);
    if (i < kMaxSamples) {
      DebugSample& s = slots[i];
      s.native_depth = CaptureNativePcs(s.pcs, kMaxNativeFrames, ucontext);
      // Not during GC: GC.compact on 3.1 protects heap pages (mprotect, its
      // read barrier), and the frame walk reading an iseq there faults
      // inside this handler, which Ruby's SEGV handler reports as a [BUG].
      s.ruby_depth = rb_during_gc() ? 0 : rb_profile_frames(0, static_cast<int>(kMaxRubyFrames), s.frames, s.lines);
    }
  }
  errno = saved_errno;
}

VALUE FramePair(const NativeFrame& f) {
  return rb_ary_new_from_args(2, f.function.empty() ? Qnil : rb_str_new_cstr(f.function.c_str()),
                              f.object.empty() ? Qnil : rb_str_new_cstr(f.object.c_str()));
}

// The unwinder is chosen (and libunwind loaded) on first use, not when the
// extension loads: a program that never asks for C frames never maps it.
bool g_capture_ready = false;
void EnsureCaptureReady() {
  if (g_capture_ready) return;
  InitNativeCapture();
  g_capture_ready = true;
}

uintptr_t VmPc() { return reinterpret_cast<uintptr_t>(&rb_hash_aref); }

// A Ruby frame is a C function's when rb_profile_frames gives it no source
// path (3.1 and 3.3 alike); Ruby-defined core methods have
// "<internal:...>" paths and are Ruby frames.
bool IsCfunc(const FrameSymbol& sym) { return sym.filename.empty() || sym.filename == "<cfunc>"; }

VALUE DebugSymbolize(VALUE, VALUE name) {
  return RubyMethod([&]() -> VALUE {
    if (!RB_TYPE_P(name, T_STRING)) ThrowTypeError("fathom: symbolize takes a String");
    std::string n(RSTRING_PTR(name), static_cast<size_t>(RSTRING_LEN(name)));
    void* addr = dlsym(RTLD_DEFAULT, n.c_str());
    if (addr == nullptr) return Qnil;
    NativeSymbolizer sym;
    NativeFrame f = sym.Symbolize(reinterpret_cast<uintptr_t>(addr));
    return FramePair(f);
  });
}

VALUE DebugNativeStack(VALUE) {
  return RubyMethod([&]() -> VALUE {
    EnsureCaptureReady();
    uintptr_t pcs[kMaxNativeFrames];
    size_t n = CaptureNativePcs(pcs, kMaxNativeFrames, nullptr);
    NativeSymbolizer sym;
    VALUE out = rb_ary_new_capa(static_cast<long>(n));
    for (size_t i = 0; i < n; ++i) rb_ary_push(out, FramePair(sym.Symbolize(pcs[i])));
    return out;
  });
}

VALUE DebugCaptureCost(VALUE, VALUE iterations) {
  return RubyMethod([&]() -> VALUE {
    long n = NUM2LONG(iterations);
    if (n <= 0) ThrowArgumentError("fathom: iterations must be positive");
    EnsureCaptureReady();
    uintptr_t pcs[kMaxNativeFrames];
    size_t depth = 0;
    auto t0 = std::chrono::steady_clock::now();
    for (long i = 0; i < n; ++i) depth = CaptureNativePcs(pcs, kMaxNativeFrames, nullptr);
    auto t1 = std::chrono::steady_clock::now();
    // The baseline a sampler pays anyway: the Ruby frames of the same stack.
    VALUE frames[kMaxRubyFrames];
    int lines[kMaxRubyFrames];
    int ruby_depth = 0;
    for (long i = 0; i < n; ++i) ruby_depth = rb_profile_frames(0, static_cast<int>(kMaxRubyFrames), frames, lines);
    auto t2 = std::chrono::steady_clock::now();
    double ns = std::chrono::duration<double, std::nano>(t1 - t0).count() / static_cast<double>(n);
    double ruby_ns = std::chrono::duration<double, std::nano>(t2 - t1).count() / static_cast<double>(n);
    return rb_ary_new_from_args(4, DBL2NUM(ns), SIZET2NUM(depth), DBL2NUM(ruby_ns), INT2NUM(ruby_depth));
  });
}

// Stops the timer and the sampling; safe to call twice.
struct TimerGuard {
  timer_t timer{};
  bool armed = false;
  void Stop() {
    if (armed) timer_delete(timer);
    armed = false;
    // timer_delete returned: no new signal; one already queued for this
    // thread was delivered on the way back from the syscall.
    g_sampling.store(false, std::memory_order_release);
  }
};

VALUE DebugSampleNative(VALUE, VALUE interval_us) {
  // State the block may outlive through a longjmp: kept outside the lambda
  // in plain storage, cleaned up on every path below.
  static TimerGuard guard;
  return RubyMethod([&]() -> VALUE {
    long us = NUM2LONG(interval_us);
    if (us < 100 || us > 1000000) ThrowArgumentError("fathom: interval_us must be 100..1000000");
    if (!rb_block_given_p()) ThrowArgumentError("fathom: sample_native needs a block");
    if (g_sampling.load()) ThrowFathomError("fathom: debug_sample_native is already running");
    if (!g_handler_installed) {
      struct sigaction sa = {}, old = {};
      sigaction(DebugSignal(), nullptr, &old);
      if (old.sa_handler != SIG_DFL && old.sa_handler != SIG_IGN) {
        ThrowFathomError("fathom: signal %d already has a handler", DebugSignal());
      }
      sa.sa_sigaction = OnDebugSignal;
      sa.sa_flags = SA_SIGINFO | SA_RESTART;
      sigemptyset(&sa.sa_mask);
      if (sigaction(DebugSignal(), &sa, nullptr) != 0) ThrowFathomError("fathom: sigaction failed: %s", strerror(errno));
      g_handler_installed = true;
    }
    EnsureCaptureReady();
    auto slots = std::make_unique<DebugSample[]>(kMaxSamples);
    g_next.store(0);
    g_slots.store(slots.get(), std::memory_order_release);

    struct sigevent sev = {};
    sev.sigev_notify = SIGEV_THREAD_ID;
    sev.sigev_signo = DebugSignal();
    sev._sigev_un._tid = static_cast<pid_t>(syscall(SYS_gettid));
    if (timer_create(CLOCK_THREAD_CPUTIME_ID, &sev, &guard.timer) != 0) {
      g_slots.store(nullptr);
      ThrowFathomError("fathom: timer_create failed: %s", strerror(errno));
    }
    guard.armed = true;
    VALUE gc_was_disabled = rb_gc_disable();
    size_t gc_count = rb_gc_count();
    struct itimerspec its = {};
    its.it_interval.tv_sec = us / 1000000;
    its.it_interval.tv_nsec = (us % 1000000) * 1000;
    its.it_value = its.it_interval;
    g_sampling.store(true, std::memory_order_release);
    timer_settime(guard.timer, 0, &its, nullptr);
    try {
      Protect([] { rb_yield(Qnil); });
    } catch (...) {
      guard.Stop();
      g_slots.store(nullptr);
      if (!RTEST(gc_was_disabled)) rb_gc_enable();
      throw;
    }
    guard.Stop();
    g_slots.store(nullptr, std::memory_order_release);
    size_t count = std::min(g_next.load(), kMaxSamples);
    // GC.start or GC.compact in the block run even with GC disabled: the
    // frame handles may be freed or moved by then. Nothing is named.
    if (rb_gc_count() != gc_count) {
      if (!RTEST(gc_was_disabled)) rb_gc_enable();
      ThrowFathomError("fathom: a GC ran during sample_native; its Ruby frames are stale");
    }

    // Names and weaving, with the GVL, GC still off (handles valid).
    NativeStackResolver resolver(VmPc());
    VALUE out = rb_ary_new_capa(static_cast<long>(count));
    for (size_t i = 0; i < count; ++i) {
      const DebugSample& s = slots[i];
      VALUE native = rb_ary_new_capa(static_cast<long>(s.native_depth));
      for (size_t k = 0; k < s.native_depth; ++k) rb_ary_push(native, FramePair(resolver.Frame(s.pcs[k]).frame));
      // rb_profile_frames lists innermost first: reverse to outermost first.
      std::vector<FrameSymbol> ruby;
      std::vector<bool> is_cfunc;
      for (int k = s.ruby_depth - 1; k >= 0; --k) {
        ruby.push_back(SymbolizeFrame(s.frames[k]));
        is_cfunc.push_back(IsCfunc(ruby.back()));
      }
      VALUE ruby_ary = rb_ary_new_capa(static_cast<long>(ruby.size()));
      for (size_t k = 0; k < ruby.size(); ++k) {
        rb_ary_push(ruby_ary, rb_ary_new_from_args(2, rb_str_new_cstr(ruby[k].name.c_str()), is_cfunc[k] ? Qtrue : Qfalse));
      }
      VALUE woven = rb_ary_new();
      for (const WovenFrame& w : resolver.Weave(is_cfunc, s.pcs, s.native_depth)) {
        if (!w.native) {
          rb_ary_push(woven, rb_str_new_cstr(ruby[w.index].name.c_str()));
        } else {
          const NativeFrame& f = resolver.Frame(s.pcs[w.index]).frame;
          std::string name = f.DisplayName();
          if (!f.function.empty() && !f.object.empty()) name += " [" + f.object + "]";
          rb_ary_push(woven, rb_str_new_cstr(name.c_str()));
        }
      }
      VALUE h = rb_hash_new();
      rb_hash_aset(h, ID2SYM(rb_intern("native")), native);
      rb_hash_aset(h, ID2SYM(rb_intern("ruby")), ruby_ary);
      rb_hash_aset(h, ID2SYM(rb_intern("woven")), woven);
      rb_ary_push(out, h);
    }
    if (!RTEST(gc_was_disabled)) rb_gc_enable();
    return out;
  });
}

}  // namespace

// How far a frame-pointer walk gets from here, compared with the unwinder:
// [frames by frame pointers, frames by the unwinder]. The walk follows
// saved rbp links while they point further up the same stack (at most
// 1 MiB apart) and stops at the first that does not: in code built without
// frame pointers (Debian's libruby) rbp holds data, and the chain breaks.
// For docs/internals/native.md's "why not frame pointers", nothing else.
__attribute__((noinline)) VALUE DebugFramePointerDepth(VALUE) {
  return RubyMethod([&]() -> VALUE {
    EnsureCaptureReady();
    uintptr_t pcs[kMaxNativeFrames];
    size_t unwound = CaptureNativePcs(pcs, kMaxNativeFrames, nullptr);
    auto* fp = static_cast<uintptr_t*>(__builtin_frame_address(0));
    size_t walked = 0;
    while (fp != nullptr && walked < kMaxNativeFrames) {
      auto* next = reinterpret_cast<uintptr_t*>(fp[0]);
      ++walked;
      if (next <= fp || reinterpret_cast<uintptr_t>(next) - reinterpret_cast<uintptr_t>(fp) > (1u << 20)) break;
      fp = next;
    }
    return rb_ary_new_from_args(2, SIZET2NUM(walked), SIZET2NUM(unwound));
  });
}

VALUE DebugNativeUnwinder(VALUE) {
  return RubyMethod([&]() -> VALUE {
    EnsureCaptureReady();
    return rb_str_new_cstr(NativeUnwinderName());
  });
}

}  // namespace fathom

extern "C" __attribute__((visibility("default"))) void Init_fathom_native_frames(void) {
  using namespace fathom;  // NOLINT(build/namespaces)
  // Fathom::Error, as the shipped extension defines it (or lib/fathom/error.rb did).
  VALUE mFathom = rb_define_module("Fathom");
  eFathomError = rb_const_defined_at(mFathom, rb_intern("Error")) ? rb_const_get_at(mFathom, rb_intern("Error"))
                                                                   : rb_define_class_under(mFathom, "Error", rb_eStandardError);
  rb_gc_register_address(&eFathomError);
  VALUE m = rb_define_module_under(rb_define_module("FathomTest"), "NativeFrames");
  DefineModuleFunctions(m, {{"unwinder", Method(DebugNativeUnwinder)},
                            {"frame_pointer_depth", Method(DebugFramePointerDepth)},
                            {"symbolize", Method(DebugSymbolize)}, {"native_stack", Method(DebugNativeStack)},
                            {"capture_cost", Method(DebugCaptureCost)}, {"sample_native", Method(DebugSampleNative)}});
}
