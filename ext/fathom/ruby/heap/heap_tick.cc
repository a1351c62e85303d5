#include "ruby/heap/heap_tick.h"
#include "ruby/init.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <vector>

#include "base/clock.h"
#include "ruby/runtime/boundary.h"
#include "heap_sampling/tick_accounting.h"
#include "ruby/runtime/gvl_owner.h"
#include "ruby/runtime/postponed_job.h"
#include "ruby/runtime/ruby_private_api.h"
#include "ruby/runtime/signal_dispatcher.h"
#include "ruby/runtime/thread_registry.h"

namespace fathom {

std::atomic<bool> HeapTick::hook_armed{false};

namespace {

// pthread primitives rather than std::mutex: after fork() the child must
// re-initialize them (the timer thread may have held the lock at fork time),
// which is well defined for pthread_mutex_init and not for std::mutex.
pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
pthread_cond_t g_wakeup;
bool g_cond_ready = false;

// Ruby threads we may signal; guarded by g_lock. Deliberately leaked: a
// static vector would be destroyed by exit() while the timer thread may
// still be reading it (seen under ASan when a forked child exits).
std::vector<pid_t>& g_threads = *new std::vector<pid_t>();
size_t g_target = 0;           // index into g_threads; guarded by g_lock
pthread_t g_thread;
bool g_thread_running = false;  // touched only with the GVL held
bool g_stop_requested = false;  // guarded by g_lock
bool g_paused_for_fork = false;  // touched only with the GVL held
uint64_t g_interval_ns = 0;

// Shared with the signal handler: lock-free atomics only.
std::atomic<const PostponedJob*> g_job{nullptr};
std::atomic<bool> g_enabled{false};
std::atomic<bool> g_missed{false};
std::atomic<bool> g_job_outstanding{false};
std::atomic<uint64_t> g_ticks{0}, g_signals{0}, g_misses{0}, g_registered{0};
// Ticks skipped because the hook was still armed from an earlier tick (no
// allocation since: the sample is on its way), jobs that ran, and ticks
// skipped because no thread held the GVL (all Ruby threads blocked).
std::atomic<uint64_t> g_armed_skips{0}, g_jobs_run{0}, g_idle_ticks{0};
// The thread that last ran the job: it held the GVL then (Ruby 3.1's pacer).
std::atomic<pid_t> g_last_runner{0};

// How a tick reaches the thread that runs Ruby code (set at Start):
//   kRoundRobin (Ruby 3.1): SIGPROF to one known Ruby thread; a handler on a
//     thread without the GVL misses and the next tick tries the next thread.
//   kGvlOwner (3.2+): SIGPROF to the thread that last took the GVL
//     (gvl_owner.h); its handler triggers the job on its own context.
//   kTrigger (3.3+, only when SIGPROF is someone else's): the timer thread
//     calls rb_postponed_job_trigger itself, which flags the main Ractor's
//     running_ec: not always the GVL holder (gvl_owner.h says when), so
//     ticks can be lost while other threads exist. Kept as the fallback
//     because losing some ticks beats refusing to profile.
enum class Mechanism { kRoundRobin, kGvlOwner, kTrigger };
Mechanism g_mechanism = Mechanism::kRoundRobin;  // written with the GVL before the thread starts

// Ruby threads we may signal (native thread ids).
void AddThread(pid_t tid) {
  pthread_mutex_lock(&g_lock);
  if (std::find(g_threads.begin(), g_threads.end(), tid) == g_threads.end()) g_threads.push_back(tid);
  pthread_mutex_unlock(&g_lock);
}

void RemoveThread(pid_t tid) {
  pthread_mutex_lock(&g_lock);
  g_threads.erase(std::remove(g_threads.begin(), g_threads.end(), tid), g_threads.end());
  pthread_mutex_unlock(&g_lock);
}

void ResetThreads() {
  pthread_mutex_lock(&g_lock);
  g_threads.clear();
  g_target = 0;
  pthread_mutex_unlock(&g_lock);
}

void InitCond() {
  if (g_cond_ready) return;
  pthread_condattr_t attr;
  pthread_condattr_init(&attr);
  pthread_condattr_setclock(&attr, CLOCK_MONOTONIC);
  pthread_cond_init(&g_wakeup, &attr);
  pthread_condattr_destroy(&attr);
  g_cond_ready = true;
}

// Async-signal-safe: reads thread-locals through ruby_native_thread_p /
// ruby_thread_has_gvl_p, and PostponedJob::Trigger is documented as
// callable from signal handlers (an atomic CAS into a preallocated buffer).
void HandleSigprof(int sig, siginfo_t* info, void* ucontext) {
  int saved_errno = errno;
  if (!g_enabled.load(std::memory_order_acquire)) {
    ForwardSigprofToPrevious(sig, info, ucontext);
  } else if (!ruby_native_thread_p()) {
    g_missed.store(true);
    g_job_outstanding.store(false);
    g_misses++;
  } else {
#ifdef HAVE_RUBY_THREAD_HAS_GVL_P
    if (!ruby_thread_has_gvl_p()) {
      g_missed.store(true);
      g_job_outstanding.store(false);
      g_misses++;
      errno = saved_errno;
      return;
    }
#endif
    const PostponedJob* job = g_job.load();
    if (job && job->Trigger()) g_registered++;
  }
  errno = saved_errno;
}

bool InstallHandler(std::string* error) { return InstallSigprofHandler(error); }

void AddNanos(struct timespec* ts, uint64_t ns) {
  ts->tv_sec += static_cast<time_t>(ns / 1000000000ULL);
  ts->tv_nsec += static_cast<long>(ns % 1000000000ULL);
  if (ts->tv_nsec >= 1000000000L) {
    ts->tv_sec++;
    ts->tv_nsec -= 1000000000L;
  }
}

// A job that was signalled but has not run after this many ticks is asked
// for again, of the next thread: on 3.1 ruby_thread_has_gvl_p() also says
// yes for a thread that is runnable but waiting for the GVL (it only knows
// whether the thread is inside a blocking region), and such a thread runs
// the job only when its turn comes, up to 100 ms per other busy thread.
constexpr uint64_t kOutstandingTicksBeforeRetry = 4;

void* TimerMain(void*) {
  pid_t pid = getpid();
  uint64_t outstanding_ticks = 0;
  pid_t signaled_runner = 0;  // 3.1: the runner the last tick signalled
  TickPacer pacer(static_cast<int64_t>(g_interval_ns));
  struct timespec deadline;
  clock_gettime(CLOCK_MONOTONIC, &deadline);
  pthread_mutex_lock(&g_lock);
  while (!g_stop_requested) {
    AddNanos(&deadline, g_interval_ns);
    while (!g_stop_requested && pthread_cond_timedwait(&g_wakeup, &g_lock, &deadline) != ETIMEDOUT) {
    }
    if (g_stop_requested) break;
    // Do not fall behind after a long stall (e.g. the machine was suspended).
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    if (now.tv_sec > deadline.tv_sec + 1) deadline = now;

    g_ticks++;
    // Ticks follow the CPU time of the thread running Ruby code (TickPacer):
    // the GVL owner (3.2+) or the thread that last ran the job (3.1). Read
    // on every wake-up, armed or not, so that a burst's time is not owed
    // again when it ends.
    pid_t runner;
    TickPacer::Verdict pace;
    if (g_mechanism == Mechanism::kRoundRobin) {
      // The runner's last signal found it without the GVL (in C under
      // rb_nogvl, e.g. Zlib deflating between the GVL holds it needs to
      // grow its buffer): its CPU clock now counts C work, not Ruby, so it
      // stops being the runner until a job runs on it again.
      if (signaled_runner != 0 && g_missed.load()) {
        pid_t expected = signaled_runner;
        g_last_runner.compare_exchange_strong(expected, 0);
      }
      signaled_runner = 0;
      runner = g_last_runner.load();
      pace = runner == 0 ? TickPacer::Verdict::kStalled : pacer.Wake(runner, ClockNs(ThreadCpuClock(runner)));
    } else {
      int64_t held_ns = 0;
      runner = GvlOwner::HeldCpu(&held_ns);
      pace = pacer.WakeHeld(runner != 0, held_ns);
    }
    if (HeapTick::hook_armed.load()) {  // a sample is already on its way
      g_armed_skips++;
      continue;
    }
    if (g_mechanism != Mechanism::kRoundRobin) {
      // No owner (every Ruby thread blocked), an owner off a CPU, or less
      // than an interval of its CPU since the last tick: nothing to sample.
      if (pace != TickPacer::Verdict::kTick) {
        g_idle_ticks++;
        continue;
      }
      g_job_outstanding.store(true);
      if (g_mechanism == Mechanism::kTrigger) {
        if (g_job.load()->Trigger()) g_registered++;
      } else if (syscall(SYS_tgkill, pid, runner, SIGPROF) == 0) {
        // Every due tick goes to whoever holds the GVL now, outstanding
        // job or not: a job flagged on a thread that then blocked before
        // reaching a safe point is flagged again on the next owner (one
        // run for both).
        g_signals++;
      }
      continue;
    }
    // 3.1: a runner still on its interval waits; a due one gets the signal
    // (it was running Ruby code an interval ago and its clock moved since);
    // a stalled one (or none yet) may have lost the GVL, so the round-robin
    // looks for the holder. A miss on the runner (it was in C without the
    // GVL) also falls back to the round-robin at the next tick.
    if (pace == TickPacer::Verdict::kWait) {
      g_idle_ticks++;
      continue;
    }
    if (pace == TickPacer::Verdict::kTick && !g_missed.exchange(false)) {
      g_job_outstanding.store(true);
      outstanding_ticks = 0;
      if (syscall(SYS_tgkill, pid, runner, SIGPROF) == 0) {
        g_signals++;
        signaled_runner = runner;
        continue;
      }
      g_job_outstanding.store(false);
      g_last_runner.store(0);  // gone
    }
    bool stale = false;
    if (g_job_outstanding.load()) {
      if (++outstanding_ticks < kOutstandingTicksBeforeRetry) continue;
      stale = true;
    }
    outstanding_ticks = 0;
    if (g_threads.empty()) continue;
    // The last one did not hold the GVL, or did not run the job: try the next.
    if (g_missed.exchange(false) || stale) g_target++;
    for (size_t attempts = 0; attempts < g_threads.size(); attempts++) {
      pid_t tid = g_threads[g_target % g_threads.size()];
      g_job_outstanding.store(true);
      if (syscall(SYS_tgkill, pid, tid, SIGPROF) == 0) {
        g_signals++;
        break;
      }
      // ESRCH: that thread is gone without us hearing of it. Forget it.
      g_job_outstanding.store(false);
      g_threads.erase(g_threads.begin() + static_cast<long>(g_target % g_threads.size()));
      if (g_threads.empty()) break;
    }
    if (!g_threads.empty()) g_target %= g_threads.size();
  }
  pthread_mutex_unlock(&g_lock);
  return nullptr;
}

bool SpawnThread(std::string* error) {
  InitCond();
  g_stop_requested = false;
  // The timer thread must never take a signal itself (it is not a Ruby
  // thread), so it starts with every signal blocked.
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  int rc = pthread_create(&g_thread, nullptr, TimerMain, nullptr);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  if (rc != 0) {
    *error = "cannot create the sampling timer thread";
    return false;
  }
  g_thread_running = true;
  return true;
}

// The thread registry's THREAD_BEGIN / THREAD_END hooks tell the timer
// the native ids of threads created after start.
const ThreadListener kThreadListener = {
    "thread begin hook", "thread end hook", [](pid_t tid) { AddThread(tid); },
    [](pid_t tid, VALUE) { RemoveThread(tid); }};

// The threads alive now, from Thread.list (calls Ruby: may raise, before
// the hooks are added), then the hooks.
void WatchThreads() {
  std::vector<pid_t> tids = RubyThreadIds(/*alive_only=*/false);
  ResetThreads();
  for (pid_t tid : tids) AddThread(tid);
  // The calling thread first: it most likely holds the GVL on the first tick.
  AddThread(CurrentTid());
  fathom::WatchThreads(&kThreadListener);
}

void UnwatchThreads() { fathom::UnwatchThreads(&kThreadListener); }

}  // namespace

bool HeapTick::Start(uint64_t interval_ns, const PostponedJob* job, std::string* error) {
  if (g_thread_running) return true;
  g_job.store(job);
  if (GvlOwner::Available()) {
    // 3.2+: signal the GVL owner; if SIGPROF is taken (another profiler) and
    // this Ruby lets any thread trigger a job (3.3+), trigger directly.
    GvlOwner::Watch();
    std::string handler_error;
    if (InstallHandler(&handler_error)) {
      g_mechanism = Mechanism::kGvlOwner;
    } else if (job->TriggersFromAnyThread()) {
      g_mechanism = Mechanism::kTrigger;
    } else {
      *error = handler_error;
      return false;
    }
  } else {
    g_mechanism = Mechanism::kRoundRobin;
    WatchThreads();
    if (!InstallHandler(error)) {
      UnwatchThreads();
      return false;
    }
  }
  g_interval_ns = interval_ns;
  g_missed.store(false);
  g_job_outstanding.store(false);
  hook_armed.store(false);
  g_enabled.store(true, std::memory_order_release);
  if (!SpawnThread(error)) {
    g_enabled.store(false);
    UnwatchThreads();
    return false;
  }
  return true;
}

namespace {
void JoinThread() {
  pthread_mutex_lock(&g_lock);
  g_stop_requested = true;
  pthread_cond_signal(&g_wakeup);
  pthread_mutex_unlock(&g_lock);
  pthread_join(g_thread, nullptr);
  g_thread_running = false;
}

void Respawn() {
  std::string error;
  if (!SpawnThread(&error)) g_enabled.store(false);  // sampling stops; the program goes on
}
}  // namespace

void HeapTick::Stop(bool unwatch_threads) {
  g_paused_for_fork = false;
  if (unwatch_threads) UnwatchThreads();
  if (!g_thread_running) return;
  GvlOwner::Unwatch();
  JoinThread();
  g_enabled.store(false, std::memory_order_release);
  hook_armed.store(false);
}

void HeapTick::PauseForFork() {
  if (!g_thread_running) return;
  JoinThread();
  g_paused_for_fork = true;
}

void HeapTick::ResumeAfterForkParent() {
  if (!g_paused_for_fork) return;
  g_paused_for_fork = false;
  Respawn();
}

void HeapTick::AfterForkChild() {
  bool resume = g_paused_for_fork || g_thread_running;  // running: a fork path that skipped PauseForFork
  g_paused_for_fork = false;
  pthread_mutex_init(&g_lock, nullptr);
  g_cond_ready = false;
  g_thread_running = false;
  g_threads.assign(1, CurrentTid());
  g_target = 0;
  GvlOwner::AfterForkChild();
  g_last_runner.store(0);
  g_missed.store(false);
  g_job_outstanding.store(false);
  if (resume) Respawn();
}

void HeapTick::JobRan() {
  g_job_outstanding.store(false);
  g_jobs_run++;
  NoteRunner();
}

void HeapTick::NoteRunner() { g_last_runner.store(CurrentTid(), std::memory_order_relaxed); }

HeapTick::Stats HeapTick::stats() {
  return Stats{g_ticks.load(),    g_signals.load(),     g_misses.load(),    g_registered.load(),
               g_jobs_run.load(), g_armed_skips.load(), g_idle_ticks.load()};
}

const char* HeapTick::mechanism() {
  switch (g_mechanism) {
    case Mechanism::kGvlOwner:
      return "gvl-owner";
    case Mechanism::kTrigger:
      return "trigger";
    case Mechanism::kRoundRobin:
      break;
  }
  return "signal";
}

namespace {
VALUE NativeBeforeFork(VALUE) {
  return RubyMethod([] {
    HeapTick::PauseForFork();
    return Qnil;
  });
}

VALUE NativeAfterForkParent(VALUE) {
  return RubyMethod([] {
    HeapTick::ResumeAfterForkParent();
    return Qnil;
  });
}
}  // namespace

void InitHeapTick(VALUE mNative) {
  SetDirectedSignalHandler(HandleSigprof);
  // Process-wide fork hooks, called by lib/fathom/process/fork_hooks.rb around
  // Process._fork (the child's side is HeapCollector#after_fork_child).
  rb_define_module_function(mNative, "before_fork", RUBY_METHOD_FUNC(NativeBeforeFork), 0);
  rb_define_module_function(mNative, "after_fork_parent", RUBY_METHOD_FUNC(NativeAfterForkParent), 0);
}

}  // namespace fathom
