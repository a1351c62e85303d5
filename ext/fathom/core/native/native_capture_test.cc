#include "native/native_capture.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/time.h>

#include <atomic>
#include <string>
#include <vector>

#include "native_symbols/native_symbolizer.h"

// A known call chain. extern "C" + noinline + a side effect after each call
// so that none is inlined or turned into a tail call.
extern "C" {
__attribute__((noinline)) size_t fathom_test_chain_c(uintptr_t* out, size_t max);
__attribute__((noinline)) size_t fathom_test_chain_b(uintptr_t* out, size_t max);
__attribute__((noinline)) size_t fathom_test_chain_a(uintptr_t* out, size_t max);
}

namespace {
volatile int g_sink;
}

extern "C" size_t fathom_test_chain_c(uintptr_t* out, size_t max) {
  size_t n = fathom::CaptureNativePcs(out, max, nullptr);
  g_sink = g_sink + 1;
  return n;
}
extern "C" size_t fathom_test_chain_b(uintptr_t* out, size_t max) {
  size_t n = fathom_test_chain_c(out, max);
  g_sink = g_sink + 1;
  return n;
}
extern "C" size_t fathom_test_chain_a(uintptr_t* out, size_t max) {
  size_t n = fathom_test_chain_b(out, max);
  g_sink = g_sink + 1;
  return n;
}

namespace fathom {
namespace {

std::vector<std::string> Names(const uintptr_t* pcs, size_t n) {
  NativeSymbolizer sym;
  std::vector<std::string> names;
  for (size_t i = 0; i < n; ++i) names.push_back(sym.Symbolize(pcs[i]).DisplayName());
  return names;
}

std::string Join(const std::vector<std::string>& v) {
  std::string s;
  for (const auto& x : v) s += x + " ";
  return s;
}

// Every capture test runs with each unwinder: libgcc's (the default) and
// libunwind (when libunwind8 is installed, as script/setup does; its first
// use on this thread is in SetUp, outside the handler: see native_capture.h).
class NativeCapture : public ::testing::TestWithParam<NativeUnwinder> {
 protected:
  void SetUp() override {
    NativeUnwinder got = InitNativeCapture(GetParam() == NativeUnwinder::kLibunwind);
    if (got != GetParam()) GTEST_SKIP() << "libunwind.so.8 not installed (apt-get install libunwind8)";
  }
  void TearDown() override { InitNativeCapture(); }  // back to the default
};

INSTANTIATE_TEST_SUITE_P(Unwinders, NativeCapture,
                         ::testing::Values(NativeUnwinder::kLibunwind, NativeUnwinder::kLibgcc),
                         [](const ::testing::TestParamInfo<NativeUnwinder>& info) {
                           return std::string(info.param == NativeUnwinder::kLibunwind ? "libunwind" : "libgcc");
                         });

TEST_P(NativeCapture, KnownChainInnermostFirst) {
  uintptr_t pcs[64];
  size_t n = fathom_test_chain_a(pcs, 64);
  ASSERT_GE(n, 4u);
  std::vector<std::string> names = Names(pcs, n);
  // The caller of CaptureNativePcs comes first; the capture itself is skipped.
  EXPECT_EQ(names[0], "fathom_test_chain_c") << Join(names);
  EXPECT_EQ(names[1], "fathom_test_chain_b") << Join(names);
  EXPECT_EQ(names[2], "fathom_test_chain_a") << Join(names);
  // ...and it goes on to this test's own frames, through gtest.
  bool saw_main = false;
  for (const auto& s : names) saw_main = saw_main || s == "main";
  EXPECT_TRUE(saw_main) << Join(names);
}

TEST_P(NativeCapture, StopsAtMax) {
  uintptr_t pcs[2] = {0, 0};
  EXPECT_EQ(fathom_test_chain_a(pcs, 2), 2u);
  EXPECT_EQ(fathom_test_chain_a(pcs, 0), 0u);
  EXPECT_EQ(CaptureNativePcs(nullptr, 8, nullptr), 0u);
}

// ---- from a signal handler: the handler's frames are skipped and the
// interrupted code comes first.

uintptr_t g_signal_pcs[128];
std::atomic<size_t> g_signal_count{0};
std::atomic<int> g_signals{0};

void OnProf(int, siginfo_t*, void* uc) {
  if (g_signal_count.load(std::memory_order_relaxed) == 0) {
    size_t n = CaptureNativePcs(g_signal_pcs, 128, uc);
    g_signal_count.store(n, std::memory_order_release);
  }
  g_signals.fetch_add(1);
}

}  // namespace
}  // namespace fathom

extern "C" {
__attribute__((noinline)) void fathom_test_spin_inner() {
  while (fathom::g_signal_count.load(std::memory_order_acquire) == 0) g_sink = g_sink + 1;
  g_sink = g_sink + 1;
}
__attribute__((noinline)) void fathom_test_spin_outer() {
  fathom_test_spin_inner();
  g_sink = g_sink + 1;
}
}

namespace fathom {
namespace {

TEST_P(NativeCapture, FromSignalHandlerStartsAtTheInterruptedCode) {
  g_signal_count.store(0);
  struct sigaction sa = {}, old = {};
  sa.sa_sigaction = OnProf;
  sa.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&sa.sa_mask);
  ASSERT_EQ(sigaction(SIGPROF, &sa, &old), 0);
  // The process's CPU-time timer: this thread is the one burning CPU.
  struct itimerval it = {{0, 1000}, {0, 1000}};
  ASSERT_EQ(setitimer(ITIMER_PROF, &it, nullptr), 0);
  fathom_test_spin_outer();
  struct itimerval off = {};
  setitimer(ITIMER_PROF, &off, nullptr);
  sigaction(SIGPROF, &old, nullptr);

  size_t n = g_signal_count.load();
  ASSERT_GE(n, 3u);
  std::vector<std::string> names = Names(g_signal_pcs, n);
  // The signal lands in the loop itself or, in the -O0 test build, in one
  // of the out-of-line helpers of the atomic load it calls (one frame);
  // never in the handler or the trampoline, which are skipped.
  size_t i = names[0] == "fathom_test_spin_inner" ? 0 : 1;
  ASSERT_LT(i + 1, names.size());
  EXPECT_EQ(names[i], "fathom_test_spin_inner") << Join(names);
  EXPECT_EQ(names[i + 1], "fathom_test_spin_outer") << Join(names);
  for (const auto& s : names) EXPECT_NE(s, "fathom::(anonymous namespace)::OnProf(int, siginfo_t*, void*)");
}

}  // namespace
}  // namespace fathom

#include "native/native_stack_resolver.h"

namespace fathom {
namespace {

// The resolver end to end on a real capture. This test binary plays the
// VM: its object is the "VM object", and no rb_vm_exec is in the stack, so
// nothing is woven; the frames are symbolized and cached.
TEST(NativeStackResolver, SymbolizesAndCachesRealCaptures) {
  uintptr_t pcs[64];
  size_t n = fathom_test_chain_a(pcs, 64);
  ASSERT_GE(n, 3u);
  NativeStackResolver r(reinterpret_cast<uintptr_t>(&fathom_test_chain_a));
  EXPECT_FALSE(r.vm_object_path().empty());
  const NativeStackResolver::Resolved& c = r.Frame(pcs[0]);
  EXPECT_EQ(c.frame.function, "fathom_test_chain_c");
  EXPECT_EQ(c.kind, NativeFrameKind::kOther);  // named, not vm_*
  EXPECT_EQ(&r.Frame(pcs[0]), &c);             // cached
  std::vector<WovenFrame> woven = r.Weave({false, true}, pcs, n);
  ASSERT_EQ(woven.size(), 2u);
  EXPECT_FALSE(woven[0].native);
  EXPECT_FALSE(woven[1].native);
}

}  // namespace
}  // namespace fathom
