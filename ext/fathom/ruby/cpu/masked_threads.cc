#include "ruby/cpu/masked_threads.h"
#include "ruby/cpu/thread_slot.h"

#include <pthread.h>
#include <signal.h>

#include <atomic>

namespace fathom {
namespace {

constexpr int kMaxMasked = kMaxThreads;  // one per sampled thread at most
std::atomic<int32_t> g_masked[kMaxMasked];
std::atomic<int> g_masked_count{0};
std::atomic<int> g_masked_high{0};  // entries [0, high) may be in use

}  // namespace

int MaskedCount() { return g_masked_count.load(std::memory_order_relaxed); }

bool MaskedContains(int32_t tid) {
  int high = g_masked_high.load();
  for (int i = 0; i < high; i++)
    if (g_masked[i].load(std::memory_order_relaxed) == tid) return true;
  return false;
}

bool MaskedAdd(int32_t tid) {
  for (int i = 0; i < kMaxMasked; i++) {
    int32_t expected = 0;
    if (g_masked[i].compare_exchange_strong(expected, tid)) {
      int high = g_masked_high.load();
      while (high < i + 1 && !g_masked_high.compare_exchange_weak(high, i + 1)) {
      }
      g_masked_count.fetch_add(1);
      return true;
    }
  }
  return false;
}

bool MaskedRemove(int32_t tid) {
  int high = g_masked_high.load();
  for (int i = 0; i < high; i++) {
    int32_t expected = tid;
    if (g_masked[i].load(std::memory_order_relaxed) == tid && g_masked[i].compare_exchange_strong(expected, 0)) {
      g_masked_count.fetch_sub(1);
      return true;
    }
  }
  return false;
}

void SetSigprofBlocked(bool blocked) {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGPROF);
  pthread_sigmask(blocked ? SIG_BLOCK : SIG_UNBLOCK, &set, nullptr);
}

}  // namespace fathom
