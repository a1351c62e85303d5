#include "ruby/cpu/cpu_sampler.h"
#include "ruby/cpu/gvl_event_thread.h"
#include "ruby/cpu/masked_threads.h"
#include "ruby/cpu/mn_threads.h"
#include "ruby/cpu/sample_labels.h"
#include "ruby/cpu/thread_slot.h"

#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <time.h>
#include <unistd.h>

#include <atomic>
#include <vector>

#include <ruby/debug.h>
#ifdef HAVE_RB_INTERNAL_THREAD_ADD_EVENT_HOOK
#include <ruby/thread.h>
#endif

#include "base/clock.h"
#include "ruby/runtime/boundary.h"
#include "native/native_capture.h"
#include "ruby/runtime/postponed_job.h"
#include "ruby/runtime/ruby_private_api.h"
#include "ruby/runtime/signal_dispatcher.h"
#include "ruby/runtime/thread_registry.h"

#ifndef sigev_notify_thread_id
#define sigev_notify_thread_id _sigev_un._tid
#endif

namespace fathom {
namespace {

ThreadSlot g_slots[kMaxThreads];
std::atomic<int> g_slot_high{0};  // slots [0, high) may be in use

// Fathom's own sleeping helper threads (the CPU drainer, the GC counters
// poller), by native thread id: never given a slot, by a profiler started
// before or after they marked themselves. A thread unmarks itself when it
// ends, because Ruby 3.1 hands a finished thread's native thread (same
// tid) to the next Ruby thread. Read and written only with the GVL held.
constexpr int kMaxInternalThreads = 8;
pid_t g_internal_tids[kMaxInternalThreads];

bool IsInternalThread(pid_t tid) {
  for (pid_t t : g_internal_tids)
    if (t == tid) return true;
  return false;
}

std::atomic<bool> g_enabled{false};
SampleRing* g_ring = nullptr;  // set before g_enabled, cleared after every slot is quiet
CpuSampler::Config g_config;
const PostponedJob* g_sampler_drain_job = nullptr;
CpuSampler::ThreadEndCallback g_on_end = nullptr;
bool g_running = false;  // GVL only
bool g_watching = false;
size_t g_drain_threshold = 64;

std::atomic<uint64_t> g_signals{0}, g_samples{0}, g_threads_seen{0}, g_timer_errors{0}, g_foreign{0};

uint64_t NextRandom(uint64_t* state) {
  uint64_t x = *state;
  x ^= x << 13;
  x ^= x >> 7;
  x ^= x << 17;
  *state = x;
  return x;
}

// The next one-shot expiry: the interval jittered uniformly within ±25%, so
// that periodic work is not sampled in lockstep; the mean stays the
// interval. Each sample carries the measured delta, so jitter costs no
// accuracy.
void Arm(ThreadSlot* slot) {
  int64_t span = g_config.interval_ns / 2;
  int64_t next = g_config.interval_ns - span / 2 + (span > 0 ? static_cast<int64_t>(NextRandom(&slot->rng) % static_cast<uint64_t>(span)) : 0);
  if (next < 1000) next = 1000;
  struct itimerspec its = {};
  its.it_value.tv_sec = static_cast<time_t>(next / 1000000000);
  its.it_value.tv_nsec = static_cast<long>(next % 1000000000);
  if (timer_settime(slot->timer, 0, &its, nullptr) != 0) g_timer_errors.fetch_add(1, std::memory_order_relaxed);
}

ThreadSlot* FindSlot(int32_t tid) {
  int high = g_slot_high.load(std::memory_order_acquire);
  for (int i = 0; i < high; i++)
    if (g_slots[i].tid.load(std::memory_order_relaxed) == tid) return &g_slots[i];
  return nullptr;
}

// GVL held. Creates the thread's timer and arms it. initial: the thread's
// state until its next GVL event (3.2+): running for the caller, which holds
// the GVL; blocked for every other thread alive at start, which therefore
// does not (asleep, blocked, in C, or waiting for the GVL, which its next
// RESUMED will tell).
void AddThread(pid_t tid, ThreadState initial = ThreadState::kRunning, bool dormant = false) {
  if (tid <= 0 || IsInternalThread(tid)) return;
  if (ThreadSlot* known = FindSlot(tid)) {
    // A native thread Ruby 3.1 took from its thread cache for a new Ruby
    // thread: its timer stopped re-arming while it had no Ruby thread
    // (OnSignal). A new thread, new baselines.
    if (known->active.load() && known->has_timer) {
      known->last_cpu_ns = ClockNs(ThreadCpuClock(tid));
      known->last_wall_ns = MonotonicNs();
      known->last_voluntary_switches = -1;
      Arm(known);
    }
    return;
  }
  g_threads_seen.fetch_add(1, std::memory_order_relaxed);
  int index = -1;
  for (int i = 0; i < kMaxThreads; i++) {
    if (g_slots[i].tid.load(std::memory_order_relaxed) == 0) {
      index = i;
      break;
    }
  }
  if (index < 0) return;
  ThreadSlot& s = g_slots[index];
  s.tid.store(tid);
  if (index + 1 > g_slot_high.load()) g_slot_high.store(index + 1, std::memory_order_release);
  struct sigevent sev = {};
  sev.sigev_notify = SIGEV_THREAD_ID;
  sev.sigev_signo = SIGPROF;
  sev.sigev_notify_thread_id = tid;
  sev.sigev_value.sival_int = (kTimerSignalTag << 16) | index;
  clockid_t clock = g_config.mode == CpuMode::kCpu ? ThreadCpuClock(tid) : CLOCK_MONOTONIC;
  if (timer_create(clock, &sev, &s.timer) != 0) {
    g_timer_errors.fetch_add(1, std::memory_order_relaxed);
    s.tid.store(0);
    return;
  }
  s.has_timer = true;
  s.state.store(static_cast<uint8_t>(initial));
  s.last_cpu_ns = ClockNs(ThreadCpuClock(tid));
  s.last_wall_ns = MonotonicNs();
  s.last_voluntary_switches = -1;
  s.rng = 0x9e3779b97f4a7c15ULL ^ (static_cast<uint64_t>(tid) * 0xbf58476d1ce4e5b9ULL) ^ static_cast<uint64_t>(s.last_wall_ns);
  if (s.rng == 0) s.rng = 1;
  s.last_labels = CpuLabels{};  // not the slot's previous thread's
  s.resumes_at_sample = s.resumes.load();
  s.off_gvl_at_sample = initial != ThreadState::kRunning;
  s.probe_at_resume.store(false);
  s.dormant.store(dormant);
  s.active.store(true);
  if (!dormant) Arm(&s);
}

// GVL held (or in a forked child before any other thread exists). After
// this returns, the slot's handler is not running and will not sample.
void RemoveSlot(ThreadSlot* s) {
  s->active.store(false);
  while (s->busy.load()) sched_yield();  // a handler on another thread is finishing (microseconds)
  if (s->has_timer) {
    timer_delete(s->timer);
    s->has_timer = false;
  }
  s->tid.store(0);
}

// ------------------------------------------------------------ state

// The calling thread's Ruby frames into the cell (the handler's sample and
// the probe). Async-signal-safe: rb_profile_frames reads, never allocates.
void ReadOwnFrames(SampleRing* ring, const SampleRing::Slot& cell) {
  int max = static_cast<int>(ring->max_depth());
  int depth = rb_profile_frames(0, max, reinterpret_cast<VALUE*>(cell.frames), cell.lines);
  cell.header->depth = static_cast<uint16_t>(depth < 0 ? 0 : depth);
  cell.header->truncated = depth >= max;
}

#ifdef HAVE_RB_INTERNAL_THREAD_ADD_EVENT_HOOK
rb_internal_thread_event_hook_t* g_event_hook = nullptr;

// At RESUMED, after a sample taken during a GC read no stack: the thread
// holds the GVL again (so no GC runs) and has run no Ruby code since it
// waited, so its frames are the ones it waited in. They go into the ring as
// a probe, which accounts no time and gives the held sample its stack
// (CpuAggregate). A wall-mode thread woken during a GC otherwise had its
// previous sample's stack, from before it blocked: measured on 3.3, a
// thread alternating work and sleep beside back-to-back GCs showed 255 ms of
// its sleep under the work. SIGPROF is blocked meanwhile: the handler on
// this thread would clear `busy` under us.
void TakeStackProbe(ThreadSlot* s) {
  sigset_t prof, old;
  sigemptyset(&prof);
  sigaddset(&prof, SIGPROF);
  pthread_sigmask(SIG_BLOCK, &prof, &old);
  s->busy.store(true);
  if (g_enabled.load() && s->active.load() && s->tid.load(std::memory_order_relaxed) == CurrentTid() && !rb_during_gc()) {
    SampleRing* ring = g_ring;
    SampleRing::Slot cell = ring->Claim();
    if (cell) {
      SampleHeader* h = cell.header;
      *h = SampleHeader();  // no native PCs, no time
      h->time_ns = MonotonicNs();
      h->thread_id = s->tid.load(std::memory_order_relaxed);
      h->stack_probe = true;
      h->gvl_since_previous = s->GvlSince(ThreadState::kGvlWait, /*update=*/false);
      ReadOwnFrames(ring, cell);
      ring->Publish(cell);
    }
  }
  s->busy.store(false);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
}

// Runs on the thread that changes state (another thread's event returns at
// once), often without the GVL: finds its slot and stores one byte (at
// RESUMED, after a sample taken during a GC, also takes a probe). No
// allocation, no Ruby.
void ThreadEventHook(rb_event_flag_t event, const rb_internal_thread_event_data_t* data, void*) {
  // Another Ruby thread's event (READY from the thread that woke it, on
  // Ruby 4.0) must not change this thread's slot: gvl_event_thread.h.
  if (event == RUBY_INTERNAL_THREAD_EVENT_RESUMED) {
    GvlEventThread::NoteResumed(data);
  } else if (!GvlEventThread::IsCallers(data)) {
    return;
  }
  bool enabled = g_enabled.load(std::memory_order_relaxed);
  if (!enabled && MaskedCount() == 0) return;
  int32_t tid = CurrentTid();
  if (event != RUBY_INTERNAL_THREAD_EVENT_SUSPENDED && MaskedCount() > 0 &&
      MaskedRemove(tid)) {
    // The pending sample (if the timer fired) is taken right here, in the
    // blocked state that is still recorded.
    SetSigprofBlocked(false);
  }
  if (!enabled) return;
  ThreadSlot* s = FindSlot(tid);
  if (s == nullptr) return;
  if (event != RUBY_INTERNAL_THREAD_EVENT_SUSPENDED && s->dormant.load(std::memory_order_relaxed) &&
      s->dormant.exchange(false)) {
    // Its first sample, in the state it had since start (blocked), taken
    // here on the thread itself as the signal handler would; it arms the
    // timer.
    CpuSampler::OnSignal(static_cast<int>(s - g_slots), nullptr);
  }
  ThreadState state;
  if (event == RUBY_INTERNAL_THREAD_EVENT_READY) {
    state = ThreadState::kGvlWait;
  } else if (event == RUBY_INTERNAL_THREAD_EVENT_RESUMED) {
    state = ThreadState::kRunning;
    if (s->probe_at_resume.exchange(false, std::memory_order_relaxed)) TakeStackProbe(s);
    s->resumes.fetch_add(1, std::memory_order_relaxed);  // read by this thread's handler only
  } else if (event == RUBY_INTERNAL_THREAD_EVENT_SUSPENDED) {
    state = ThreadState::kBlocked;
  } else {
    return;
  }
  s->state.store(static_cast<uint8_t>(state), std::memory_order_relaxed);
  if (state == ThreadState::kBlocked && g_config.mode == CpuMode::kWall && s->active.load() && MaskedAdd(tid))
    SetSigprofBlocked(true);
}
#endif

ThreadState CurrentState(const ThreadSlot* s) {
#ifdef HAVE_RB_INTERNAL_THREAD_ADD_EVENT_HOOK
  auto state = static_cast<ThreadState>(s->state.load(std::memory_order_relaxed));
#elif defined(HAVE_RUBY_THREAD_HAS_GVL_P)
  // 3.1: outside a blocking region the thread runs Ruby or waits for the
  // GVL after its time slice (the two cannot be told apart).
  auto state = ruby_thread_has_gvl_p() ? ThreadState::kRunning : ThreadState::kBlocked;
#else
  auto state = ThreadState::kUnknown;
#endif
  return state;
}

// Whether a thread sampled while a GC runs was stopped by that GC. With the
// GVL events (3.2+) its state says so: running (it holds the GVL, so it runs
// the GC) or waiting for the GVL. On 3.1 "running" only means "not in a
// blocking region", which Kernel#sleep, Queue#pop and Mutex#lock are not:
// there the thread counts as stopped by the GC only if its CPU clock moved
// for at least a quarter of the time since its previous sample (the GC's
// runner burns CPU; a sleeper's clock barely moves). Async-signal-safe.
bool StoppedByGc(ThreadState state, int64_t cpu_delta, int64_t wall_delta) {
  if (state == ThreadState::kGvlWait) return true;
  if (state != ThreadState::kRunning) return false;
#ifdef HAVE_RB_INTERNAL_THREAD_ADD_EVENT_HOOK
  (void)cpu_delta;
  (void)wall_delta;
  return true;
#else
  return cpu_delta * 4 >= wall_delta;
#endif
}

// ------------------------------------------------------------ thread hooks

// On the thread registry's THREAD_BEGIN / THREAD_END hooks (GVL held).
const ThreadListener kThreadListener = {"cpu thread begin hook", "cpu thread end hook",
                                        [](pid_t tid) {
                                          if (g_running) AddThread(tid);
                                        },
                                        [](pid_t tid, VALUE thread) {
                                          ThreadSlot* s = FindSlot(tid);
                                          if (s == nullptr) return;
                                          RemoveSlot(s);
                                          if (g_on_end) g_on_end(tid, thread);
                                        }};

void WatchThreads() {
  fathom::WatchThreads(&kThreadListener);
#ifdef HAVE_RB_INTERNAL_THREAD_ADD_EVENT_HOOK
  GvlEventThread::NoteRunning(rb_thread_current());  // the GVL holder (gvl_event_thread.h)
  // Added once and kept: it must unblock SIGPROF on threads that were
  // blocked when sampling stopped (it returns at once when idle).
  if (g_event_hook == nullptr)
    g_event_hook = rb_internal_thread_add_event_hook(
      ThreadEventHook,
      RUBY_INTERNAL_THREAD_EVENT_READY | RUBY_INTERNAL_THREAD_EVENT_RESUMED | RUBY_INTERNAL_THREAD_EVENT_SUSPENDED,
      nullptr);
#endif
  g_watching = true;
}

void UnwatchThreads() {
  if (!g_watching) return;
  fathom::UnwatchThreads(&kThreadListener);
  g_watching = false;
}

void RemoveAllSlots() {
  int high = g_slot_high.load();
  for (int i = 0; i < high; i++)
    if (g_slots[i].tid.load() != 0) RemoveSlot(&g_slots[i]);
  g_slot_high.store(0);
}

// At exit, before the VM tears threads down: no more sampling (a handler
// must not walk the frames of a thread being destroyed).
void StopAtExit(VALUE) {
  NoThrow("cpu sampler at exit", [] {
    if (g_running) CpuSampler::Stop();
  });
}

// Wall mode at stop: threads still blocked (SIGPROF blocked, their sample
// pending; or dormant since start, never sampled) would lose the time since
// their last sample. Ruby 3.3+ reads
// their stack with rb_profile_thread_frames (GVL held; the thread is outside
// Ruby code, its frames are still) and a last sample goes into the ring.
// Before 3.3 the sample has no stack. g_enabled is already false: the
// handler cannot race us on the slot.
void AccountBlockedThreads() {
  int high = g_slot_high.load();
  for (int i = 0; i < high; i++) {
    ThreadSlot& s = g_slots[i];
    int32_t tid = s.tid.load();
    if (tid == 0 || !s.active.load() || !(s.dormant.load() || MaskedContains(tid))) continue;
    while (s.busy.load()) sched_yield();
    SampleRing::Slot cell = g_ring->Claim();
    if (!cell) continue;
    int64_t wall = MonotonicNs();
    SampleHeader* h = cell.header;
    h->time_ns = wall;
    // Its CPU clock read from here: a thread in C without the GVL (deflate)
    // has burned CPU since it released the GVL.
    int64_t cpu = ClockNs(ThreadCpuClock(tid));
    h->cpu_delta_ns = cpu > s.last_cpu_ns ? cpu - s.last_cpu_ns : 0;
    h->wall_delta_ns = wall - s.last_wall_ns;
    h->thread_id = tid;
    h->state = ThreadState::kBlocked;
    h->labels = s.last_labels;
    h->depth = 0;
    h->truncated = false;
    h->stack_from_previous = true;  // unless its frames are read below: it has run no Ruby code since
    h->stack_probe = false;
    h->stayed_runnable = false;  // another thread's switches are not ours to read
    // Read from here: the handler and the hook are quiet (stopped, and the
    // thread is outside Ruby code).
#ifdef HAVE_RB_INTERNAL_THREAD_ADD_EVENT_HOOK
    h->gvl_since_previous = s.GvlSince(ThreadState::kBlocked, /*update=*/false);
#else
    h->gvl_since_previous = GvlSincePrevious::kUnknown;
#endif
#ifdef HAVE_RB_PROFILE_THREAD_FRAMES
    VALUE thread = FindRubyThread(tid);
    if (!NIL_P(thread)) {
      int max = static_cast<int>(g_ring->max_depth());
      int depth = rb_profile_thread_frames(thread, 0, max, reinterpret_cast<VALUE*>(cell.frames), cell.lines);
      h->depth = static_cast<uint16_t>(depth < 0 ? 0 : depth);
      h->truncated = depth >= max;
      h->stack_from_previous = h->depth == 0;
    }
#endif
    g_ring->Publish(cell);
    s.last_wall_ns = wall;
  }
}

}  // namespace

bool CpuSampler::Start(SampleRing* ring, const Config& config, const PostponedJob* drain_job, ThreadEndCallback on_end,
                       std::string* error) {
  if (g_running) {
    *error = "another CPU or wall profiler is already running in this process";
    return false;
  }
  if (MnThreadsOn()) {  // mn_threads.h
    *error = kMnThreadsRefusal;
    return false;
  }
  if (!InstallSigprofHandler(error)) return false;
  // The threads alive now, read first: Thread.list calls Ruby, which may
  // raise (under Protect, before any of our state changes).
  std::vector<pid_t> tids = RubyThreadIds(/*alive_only=*/true);
  g_ring = ring;
  g_config = config;
  g_sampler_drain_job = drain_job;
  g_on_end = on_end;
  g_drain_threshold = ring->capacity() / 8 > 0 ? ring->capacity() / 8 : 1;
  g_enabled.store(true);
  g_running = true;
  WatchThreads();
  pid_t self = CurrentTid();
  AddThread(self, ThreadState::kRunning);
#ifdef HAVE_RB_INTERNAL_THREAD_ADD_EVENT_HOOK
  bool dormant = config.mode == CpuMode::kWall;
#else
  bool dormant = false;  // no GVL events to wake them: signalled from the start
#endif
  for (pid_t tid : tids)
    if (tid != self) AddThread(tid, ThreadState::kBlocked, dormant);
  if (g_slot_high.load() == 0) {
    Stop();
    *error = "cannot create a per-thread timer (timer_create failed)";
    return false;
  }
  return true;
}

void CpuSampler::Stop(bool account_blocked) {
  if (!g_running) return;
  UnwatchThreads();
  g_enabled.store(false);
  if (account_blocked && g_config.mode == CpuMode::kWall) AccountBlockedThreads();
  RemoveAllSlots();
  g_running = false;
  g_ring = nullptr;
}

bool CpuSampler::running() { return g_running; }

void CpuSampler::AfterForkChild() {
  // The parent's helper threads do not exist here (their tids may be reused).
  for (pid_t& t : g_internal_tids) t = 0;
  if (!g_running) return;
  // The parent's timers are not inherited and its other threads are gone:
  // forget every slot without touching their timers (none exist here).
  for (int i = 0; i < kMaxThreads; i++) {
    g_slots[i].active.store(false);
    g_slots[i].busy.store(false);
    g_slots[i].has_timer = false;
    g_slots[i].tid.store(0);
  }
  g_slot_high.store(0);
  AddThread(CurrentTid());
}

void CpuSampler::SetCurrentThreadInternal(bool internal) {
  pid_t tid = CurrentTid();
  for (pid_t& t : g_internal_tids)
    if (t == tid) t = 0;
  if (!internal) return;
  for (pid_t& t : g_internal_tids) {
    if (t == 0) {
      t = tid;
      break;
    }
  }
  if (ThreadSlot* s = FindSlot(tid)) RemoveSlot(s);
}

void CpuSampler::OnSignal(int index, const void* ucontext) {
  g_signals.fetch_add(1, std::memory_order_relaxed);
  if (index < 0 || index >= kMaxThreads) return;
  ThreadSlot* s = &g_slots[index];
  s->busy.store(true);
  // Checked after announcing busy: Stop/RemoveSlot clear `active` and then
  // wait for busy to clear, so one of the two sees the other (seq_cst).
  // ruby_native_thread_p: a thread that ended without our THREAD_END hook
  // seeing it (it ended while we were stopped, but Thread.list still listed
  // it at start) may sit in Ruby 3.1's native-thread cache with no
  // execution context: rb_profile_frames would read through NULL.
  if (!g_enabled.load() || !s->active.load() || s->tid.load(std::memory_order_relaxed) != CurrentTid() ||
      !ruby_native_thread_p()) {
    g_foreign.fetch_add(1, std::memory_order_relaxed);
    s->busy.store(false);
    return;
  }
  int64_t wall = MonotonicNs();
  int64_t cpu = ThreadCpuNs();
  SampleRing* ring = g_ring;
  SampleRing::Slot cell = ring->Claim();
  if (cell) {
    SampleHeader* h = cell.header;
    h->time_ns = wall;
    h->cpu_delta_ns = cpu - s->last_cpu_ns;
    h->wall_delta_ns = wall - s->last_wall_ns;
    h->thread_id = s->tid.load(std::memory_order_relaxed);
    s->last_labels = ReadLabels();
    h->labels = s->last_labels;
    ThreadState state = CurrentState(s);
    h->stack_from_previous = false;
    h->stack_probe = false;
    h->stayed_runnable = false;
    if (g_config.mode == CpuMode::kWall) {
      int64_t switches = ThreadVoluntarySwitches();
      h->stayed_runnable = s->last_voluntary_switches >= 0 && switches == s->last_voluntary_switches;
      s->last_voluntary_switches = switches;
    }
#ifdef HAVE_RB_INTERNAL_THREAD_ADD_EVENT_HOOK
    h->gvl_since_previous = s->GvlSince(state, /*update=*/true);
#else
    h->gvl_since_previous = GvlSincePrevious::kUnknown;
#endif
    // While a GC runs (on this thread or another) the frames may be moving
    // (compaction) or half-built: no walk. Ruby's GC stops only the threads
    // that hold or want the GVL: those are charged to the GC. A thread that
    // is asleep, blocked or in C without the GVL is not stopped and does no
    // GC work: it keeps its state, and its stack is the one of its previous
    // sample (it runs no Ruby code, so its frames have not changed since).
    if (rb_during_gc()) {
      if (StoppedByGc(state, cpu - s->last_cpu_ns, wall - s->last_wall_ns)) {
        state = ThreadState::kGc;
      } else {
        h->stack_from_previous = true;
#ifdef HAVE_RB_INTERNAL_THREAD_ADD_EVENT_HOOK
        s->probe_at_resume.store(true, std::memory_order_relaxed);
#endif
      }
      h->depth = 0;
      h->truncated = false;
    } else {
      ReadOwnFrames(ring, cell);
    }
    h->state = state;
    // C frames need no Ruby data: taken during GC too (its own functions
    // then show under the "Garbage Collection" frame's sample).
    if (g_config.native && h->native != nullptr) {
      h->native_depth = static_cast<uint16_t>(CaptureNativePcs(h->native, ring->native_max(), ucontext));
    }
    ring->Publish(cell);
    g_samples.fetch_add(1, std::memory_order_relaxed);
  }
  s->last_cpu_ns = cpu;
  s->last_wall_ns = wall;
  Arm(s);
  // Ask for a drain once the ring fills up. On 3.3+ any thread may trigger
  // the job; before, only a thread that will run Ruby soon (not inside a
  // blocking region) should register it, or it waits for that thread to wake.
  if (g_sampler_drain_job != nullptr && ring->pending() >= g_drain_threshold) {
#ifdef HAVE_RUBY_THREAD_HAS_GVL_P
    if (g_sampler_drain_job->TriggersFromAnyThread() || ruby_thread_has_gvl_p()) g_sampler_drain_job->Trigger();
#else
    if (g_sampler_drain_job->TriggersFromAnyThread()) g_sampler_drain_job->Trigger();
#endif
  }
  s->busy.store(false);
}

CpuSampler::Stats CpuSampler::stats() {
  int n = 0;
  int high = g_slot_high.load();
  for (int i = 0; i < high; i++)
    if (g_slots[i].active.load()) n++;
  return Stats{g_signals.load(), g_samples.load(), g_threads_seen.load(), g_timer_errors.load(), g_foreign.load(), n};
}

const char* CpuSampler::state_source() {
#ifdef HAVE_RB_INTERNAL_THREAD_ADD_EVENT_HOOK
  return "thread-events";
#else
  return "gvl-flag";
#endif
}

void InitCpuSampler() {
  MnThreadsOn();  // reads the environment now, at load (mn_threads.h)
  SetTimerSignalHandler(CpuSampler::OnSignal);
  rb_set_end_proc(StopAtExit, Qnil);
}

}  // namespace fathom
