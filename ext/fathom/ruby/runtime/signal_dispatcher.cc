#include "ruby/runtime/signal_dispatcher.h"

#include <errno.h>

#include <atomic>

namespace fathom {
namespace {

struct sigaction g_previous_action;
bool g_installed = false;  // touched only with the GVL held
// Set at extension load; read in the handler (lock-free atomics).
std::atomic<TimerSignalHandler> g_timer_handler{nullptr};
std::atomic<DirectedSignalHandler> g_directed_handler{nullptr};
static_assert(std::atomic<TimerSignalHandler>::is_always_lock_free && std::atomic<DirectedSignalHandler>::is_always_lock_free,
              "read in a signal handler");

void Dispatch(int sig, siginfo_t* info, void* ucontext) {
  int saved_errno = errno;
  if (info != nullptr && info->si_code == SI_TIMER && (info->si_value.sival_int >> 16) == kTimerSignalTag) {
    if (TimerSignalHandler h = g_timer_handler.load()) h(info->si_value.sival_int & 0xffff, ucontext);
  } else if (DirectedSignalHandler h = g_directed_handler.load()) {
    h(sig, info, ucontext);
  } else {
    ForwardSigprofToPrevious(sig, info, ucontext);
  }
  errno = saved_errno;
}

}  // namespace

void SetTimerSignalHandler(TimerSignalHandler handler) { g_timer_handler.store(handler); }
void SetDirectedSignalHandler(DirectedSignalHandler handler) { g_directed_handler.store(handler); }

bool InstallSigprofHandler(std::string* error) {
  if (g_installed) return true;
  struct sigaction previous = {};
  if (sigaction(SIGPROF, nullptr, &previous) != 0) {
    *error = "cannot read the SIGPROF disposition";
    return false;
  }
  bool previous_is_function = (previous.sa_flags & SA_SIGINFO) ? previous.sa_sigaction != nullptr
                                                               : (previous.sa_handler != SIG_DFL && previous.sa_handler != SIG_IGN);
  if (previous_is_function) {
    *error = "SIGPROF already has a handler (is another profiler such as stackprof or vernier running?)";
    return false;
  }
  struct sigaction action = {};
  action.sa_sigaction = Dispatch;
  // SA_RESTART: a sampled thread blocked in read(2) or similar goes back to
  // waiting instead of seeing EINTR.
  action.sa_flags = SA_SIGINFO | SA_RESTART;
  sigemptyset(&action.sa_mask);
  if (sigaction(SIGPROF, &action, &g_previous_action) != 0) {
    *error = "cannot install the SIGPROF handler";
    return false;
  }
  g_installed = true;
  return true;
}

void ForwardSigprofToPrevious(int sig, siginfo_t* info, void* ucontext) {
  if (g_previous_action.sa_flags & SA_SIGINFO) {
    if (g_previous_action.sa_sigaction) g_previous_action.sa_sigaction(sig, info, ucontext);
  } else if (g_previous_action.sa_handler != SIG_DFL && g_previous_action.sa_handler != SIG_IGN &&
             g_previous_action.sa_handler) {
    g_previous_action.sa_handler(sig);
  }
}

}  // namespace fathom
