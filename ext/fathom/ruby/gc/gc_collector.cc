// Fathom::Native::GcCollector — what garbage collection costs, and when.
//
// Four internal event hooks feed a GcTracker (core/gc/gc_tracker.h):
//   GC_ENTER / GC_EXIT    each GC step: wall clock and, on the steps the
//                         tracker samples, the thread's CPU clock
//   GC_START              a cycle begins: its type, reason (major_by), cause
//                         (gc_by) and heap_live_slots before; for a major
//                         GC, the CPU clock if GC_ENTER did not read it (a
//                         major GC's steps are all measured)
//   GC_END_SWEEP          the cycle finished sweeping: heap_live_slots after
// All four run inside the GC (Ruby 3.0+; 3.1 is our floor): no allocation,
// no exceptions, no Ruby calls. What they do call:
//   - clock_gettime (CLOCK_MONOTONIC via the vDSO, ~70 ns;
//     CLOCK_THREAD_CPUTIME_ID is a real syscall, ~1.6 us of CPU on these VMs,
//     which is why it is read on some steps only);
//   - rb_gc_latest_gc_info(symbol) and rb_gc_stat(symbol): with a Symbol key
//     they only read the objspace's counters and return immediates
//     (Symbols/Integers of static ids). Both intern their key table on first
//     use, so InitGcCollector calls them once outside any GC first. The
//     Datadog profiler relies on the same property of rb_gc_latest_gc_info.
// When the tracker closes a period (every 10 ms of GC activity by default,
// or when a major GC finishes) the exit hook triggers DrainJob, a
// postponed job that moves closed periods out of the tracker's fixed ring
// into an ordinary vector at the next safe point.
//
// The other source, :counters (the default on Ruby < 3.3, chosen in
// lib/fathom/profilers/gc_profiler.rb), installs no hook at all: on 3.1/3.2 any GC
// hook sends every allocation through Ruby's slow path. `poll` reads Ruby's
// GC counters (rb_gc_count, rb_gc_stat, rb_gc_latest_gc_info) and hands
// them to a GcCounterPoll (core/gc/gc_counter_poll.h), which makes one
// period per read that saw GCs (CPU time from GC.stat(:time), no wall time
// or steps); lib/ calls it from a sleeping Ruby thread every coalesce
// interval, and start/stop/encode read once more so counts are exact at
// the window's edges.
#include "ruby/io/window_flush.h"
#include "ruby/init.h"

#include <ruby/debug.h>
#include <time.h>
#include <unistd.h>

#include <initializer_list>
#include <memory>
#include <string>
#include <vector>

#include "base/clock.h"
#include "gc/gc_counter_poll.h"
#include "gc/gc_profile.h"
#include "gc/gc_tracker.h"
#include "gc/firefox_gc_track.h"
#include "ruby/runtime/boundary.h"
#include "ruby/io/firefox_parts.h"
#include "ruby/native_class.h"
#include "ruby/runtime/postponed_job.h"
#include "ruby/runtime/ractor_guard.h"

namespace fathom {
namespace {

VALUE sym_major_by, sym_gc_by, sym_heap_live_slots;
VALUE sym_nofree, sym_oldgen, sym_shady, sym_force, sym_oldmalloc;
VALUE sym_newobj, sym_malloc, sym_method, sym_capi, sym_stress;
VALUE sym_hooks, sym_counters, sym_time, sym_minor_gc_count, sym_major_gc_count;
VALUE sym_state, sym_none;

struct GcCollector {
  std::unique_ptr<GcTracker> tracker;  // null until initialize
  bool running = false;
  std::vector<GcPeriod> periods;  // drained from the tracker
  int64_t start_realtime_ns = 0, start_monotonic_ns = 0;
  uint64_t drain_jobs = 0;
  GcSource source = GcSource::kHooks;
  GcCounterPoll poll;  // the counters source
};

// The running collector: the hooks read it. One at a time per process.
GcCollector* g_running = nullptr;

// A GC.stat or GC.latest_gc_info key the hooks and the counters read that
// this Ruby's GC does not give (null: all there). Found at Init.
const char* g_missing_gc_key = nullptr;

GcReason ReasonOf(VALUE major_by) {
  if (NIL_P(major_by)) return GcReason::kNone;
  if (major_by == sym_nofree) return GcReason::kNofree;
  if (major_by == sym_oldgen) return GcReason::kOldgen;
  if (major_by == sym_shady) return GcReason::kShady;
  if (major_by == sym_force) return GcReason::kForce;
  if (major_by == sym_oldmalloc) return GcReason::kOldmalloc;
  return GcReason::kUnknown;
}

GcCause CauseOf(VALUE gc_by) {
  if (gc_by == sym_newobj) return GcCause::kNewobj;
  if (gc_by == sym_malloc) return GcCause::kMalloc;
  if (gc_by == sym_method) return GcCause::kMethod;
  if (gc_by == sym_capi) return GcCause::kCapi;
  if (gc_by == sym_stress) return GcCause::kStress;
  return GcCause::kUnknown;
}

int64_t HeapLiveSlots() { return static_cast<int64_t>(rb_gc_stat(sym_heap_live_slots)); }

// Whether a GC is under way (marking or sweeping): the tracker counts the
// steps of a GC begun before it started, and no others (gc_tracker.h,
// "Idle steps"). At a safe point only.
bool GcInProgress() { return rb_gc_latest_gc_info(sym_state) != sym_none; }

// ---------------------------------------------------------------- counters (safe points, GVL held)

// Each call reads a counter and returns an Integer of a static value: no
// allocation, and Init has already built their key tables.
GcCounterReading ReadCounters() {
  GcCounterReading r;
  r.now_ns = MonotonicNs();
  r.count = static_cast<uint64_t>(rb_gc_count());
  r.minor_count = static_cast<uint64_t>(rb_gc_stat(sym_minor_gc_count));
  r.major_count = static_cast<uint64_t>(rb_gc_stat(sym_major_gc_count));
  r.time_ms = static_cast<uint64_t>(rb_gc_stat(sym_time));
  VALUE major_by = rb_gc_latest_gc_info(sym_major_by);
  r.latest_type = NIL_P(major_by) ? GcType::kMinor : GcType::kMajor;
  r.latest_reason = ReasonOf(major_by);
  r.latest_cause = CauseOf(rb_gc_latest_gc_info(sym_gc_by));
  return r;
}

// Reads the counters if a GC happened since the last read (one rb_gc_count
// call otherwise) and appends its periods.
void PollCounters(GcCollector* c) {
  if (!c->poll.Changed(static_cast<uint64_t>(rb_gc_count()))) {
    c->poll.NoteIdle(MonotonicNs());
    return;
  }
  c->poll.Poll(ReadCounters(), &c->periods);
}

// ---------------------------------------------------------------- hooks (inside GC)

void DrainJob(void*) {
  NoThrow("gc drain job", [] {
    GcCollector* c = g_running;
    if (!c) return;
    c->drain_jobs++;
    c->tracker->Drain(&c->periods);
  });
}

PostponedJob g_drain_job(DrainJob);

void GcEnterHook(rb_event_flag_t, VALUE, VALUE, ID, VALUE) {
  NoThrow("gc enter hook", [] {
    if (!OnMainRactor()) return NoteOtherRactor();
    GcCollector* c = g_running;
    if (!c) return;
    // The CPU clock (a system call) only where the tracker samples it
    // (core/gc/step_cpu_sampler.h), and before the wall clock here, after it
    // in the exit hook: a CPU clock read can deschedule the thread, and
    // that wait is not GC time (core/gc/gc_tracker.h, OnStepEnter).
    int64_t cpu = c->tracker->WantsCpu() ? ThreadCpuNs() : 0;
    c->tracker->OnStepEnter(MonotonicNs(), cpu);
  });
}

void GcExitHook(rb_event_flag_t, VALUE, VALUE, ID, VALUE) {
  NoThrow("gc exit hook", [] {
    if (!OnMainRactor()) return NoteOtherRactor();
    GcCollector* c = g_running;
    if (!c) return;
    int64_t wall = MonotonicNs();
    int64_t cpu = c->tracker->StepCpuMeasured() ? ThreadCpuNs() : 0;
    if (c->tracker->OnStepExit(wall, cpu)) g_drain_job.Trigger();
  });
}

void GcStartHook(rb_event_flag_t, VALUE, VALUE, ID, VALUE) {
  NoThrow("gc start hook", [] {
    if (!OnMainRactor()) return NoteOtherRactor();
    GcCollector* c = g_running;
    if (!c) return;
    // gc_start() stores the new cycle's reason flags before firing GC_START,
    // so latest_gc_info describes the cycle that is starting.
    VALUE major_by = rb_gc_latest_gc_info(sym_major_by);
    GcType type = NIL_P(major_by) ? GcType::kMinor : GcType::kMajor;
    c->tracker->OnCycleStart(type, ReasonOf(major_by), CauseOf(rb_gc_latest_gc_info(sym_gc_by)), HeapLiveSlots());
    // A step that starts a major GC is measured even when the sampler
    // skipped its GC_ENTER: it holds the GC's marking (all of a GC.start,
    // sweep included), and without this read a forced major's CPU was a
    // guess from the lazy-sweep steps around it (3.3.8: 0.1 ms for 95 ms of
    // wall time).
    if (c->tracker->StepNeedsCpuStart()) {
      int64_t cpu = ThreadCpuNs();
      c->tracker->OnStepCpuStart(MonotonicNs(), cpu);
    }
  });
}

void GcEndSweepHook(rb_event_flag_t, VALUE, VALUE, ID, VALUE) {
  NoThrow("gc end sweep hook", [] {
    if (!OnMainRactor()) return NoteOtherRactor();
    GcCollector* c = g_running;
    if (!c) return;
    c->tracker->OnCycleEnd(HeapLiveSlots());
  });
}

void AddHooks() {
  rb_add_event_hook(GcEnterHook, RUBY_INTERNAL_EVENT_GC_ENTER, Qnil);
  rb_add_event_hook(GcExitHook, RUBY_INTERNAL_EVENT_GC_EXIT, Qnil);
  rb_add_event_hook(GcStartHook, RUBY_INTERNAL_EVENT_GC_START, Qnil);
  rb_add_event_hook(GcEndSweepHook, RUBY_INTERNAL_EVENT_GC_END_SWEEP, Qnil);
}

void RemoveHooks() {
  rb_remove_event_hook(GcEnterHook);
  rb_remove_event_hook(GcExitHook);
  rb_remove_event_hook(GcStartHook);
  rb_remove_event_hook(GcEndSweepHook);
}

// ---------------------------------------------------------------- Ruby object

void CollectorFree(void* ptr) {
  NoThrow("gc collector free", [ptr] {
    GcCollector* c = static_cast<GcCollector*>(ptr);
    // At VM shutdown Ruby frees every object, running or not: leave the hooks
    // installed but inert rather than calling into a VM being torn down.
    if (g_running == c) g_running = nullptr;
    delete c;
  });
}

size_t CollectorSize(const void* ptr) {
  const GcCollector* c = static_cast<const GcCollector*>(ptr);
  size_t ring = c->tracker ? c->tracker->config().ring_capacity * sizeof(GcPeriod) : 0;
  return sizeof(*c) + ring + c->periods.capacity() * sizeof(GcPeriod);
}

const rb_data_type_t kGcCollectorType = DataType("Fathom::Native::GcCollector", nullptr, CollectorFree, CollectorSize);

// Raises TypeError (a longjmp) for a wrong receiver: call it before any C++
// object is alive in the method body.
GcCollector* Unwrap(VALUE self) { return fathom::Unwrap<GcCollector>(self, kGcCollectorType); }

// Inside a RubyMethod body.
GcCollector* Initialized(GcCollector* c) {
  if (!c->tracker) ThrowFathomError("fathom: GC collector was not initialized");
  return c;
}

VALUE CollectorAlloc(VALUE klass) { return Allocate<GcCollector, &kGcCollectorType>(klass); }

// initialize(coalesce_ns, flush_on_major, source): coalesce_ns 0 turns
// coalescing off (hooks only); source is :hooks or :counters (for which
// coalesce_ns is the polling interval lib/ uses).
VALUE CollectorInitialize(VALUE self, VALUE coalesce_ns, VALUE flush_on_major, VALUE source) {
  GcCollector* c = Unwrap(self);
  return RubyMethod([&] {
    if (c->tracker) ThrowFathomError("fathom: GC collector is already initialized");
    if (g_missing_gc_key) {
      ThrowFathomError("fathom: the GC profiler needs Ruby's default GC, whose GC.stat and GC.latest_gc_info have :%s; "
                       "this Ruby's GC has not (see GC.config[:implementation])",
                       g_missing_gc_key);
    }
    if (!RB_INTEGER_TYPE_P(coalesce_ns)) ThrowTypeError("fathom: coalesce must be an Integer of nanoseconds");
    if (source != sym_hooks && source != sym_counters) ThrowArgumentError("fathom: gc_source must be :hooks or :counters");
    long long ns = NUM2LL(coalesce_ns);
    if (ns < 0) ThrowArgumentError("fathom: coalesce must be >= 0, got %lldns", ns);
    if (source == sym_counters && ns == 0)
      ThrowArgumentError("fathom: coalesce: 0 (one period per GC step) needs gc_source: :hooks");
    c->source = source == sym_counters ? GcSource::kCounters : GcSource::kHooks;
    GcTracker::Config config;
    config.flush_interval_ns = ns;
    config.flush_on_major = RTEST(flush_on_major);
    // Uncoalesced, every step is a period and an allocation loop makes 50k/s:
    // a bigger ring rides out a late postponed job without merging.
    config.ring_capacity = ns == 0 ? 65536 : 4096;
    c->tracker = std::make_unique<GcTracker>(config);
    return self;
  });
}

void ResetData(GcCollector* c) {
  c->periods.clear();
  c->start_realtime_ns = RealtimeNs();
  c->start_monotonic_ns = MonotonicNs();
  c->tracker->Reset(c->start_monotonic_ns, GcInProgress());
  if (c->source == GcSource::kCounters) c->poll.Begin(ReadCounters());
}

VALUE CollectorStart(VALUE self) {
  GcCollector* c = Unwrap(self);
  return RubyMethod([&] {
    Initialized(c);
    if (c->running) return self;
    if (g_running) ThrowFathomError("fathom: another GC profiler is already running in this process");
    bool fresh = c->periods.empty() && c->tracker->stats().steps == 0 && c->poll.stats().polls == 0;
    if (fresh) {
      ResetData(c);
    } else if (c->source == GcSource::kCounters) {
      // Restarted: GCs while stopped are not ours.
      c->poll.Begin(ReadCounters());
    } else {
      c->tracker->SyncGcInProgress(GcInProgress());
    }
    c->running = true;
    g_running = c;
    if (c->source == GcSource::kHooks) AddHooks();
    return self;
  });
}

VALUE CollectorStop(VALUE self) {
  GcCollector* c = Unwrap(self);
  return RubyMethod([&] {
    Initialized(c);
    if (!c->running) return self;
    if (c->source == GcSource::kHooks) {
      RemoveHooks();
    } else {
      c->poll.Poll(ReadCounters(), &c->periods);
    }
    c->running = false;
    g_running = nullptr;
    c->tracker->CloseOpenPeriod();
    c->tracker->Drain(&c->periods);
    return self;
  });
}

VALUE CollectorRunningP(VALUE self) {
  GcCollector* c = Unwrap(self);
  return RubyMethod([c] { return Initialized(c)->running ? Qtrue : Qfalse; });
}

// In a forked child: the parent's GC history is the parent's to report.
VALUE CollectorAfterForkChild(VALUE self) {
  GcCollector* c = Unwrap(self);
  return RubyMethod([&] {
    ResetData(Initialized(c));
    return self;
  });
}

// poll: reads the counters (the counters source, while running); lib/'s
// polling thread calls it every coalesce interval. A no-op otherwise.
VALUE CollectorPoll(VALUE self) {
  GcCollector* c = Unwrap(self);
  return RubyMethod([&] {
    Initialized(c);
    if (c->running && c->source == GcSource::kCounters) PollCounters(c);
    return Qnil;
  });
}

GcProfileData TakeData(GcCollector* c) {
  if (c->running && c->source == GcSource::kCounters) c->poll.Poll(ReadCounters(), &c->periods);
  if (c->running) {
    // Not inside GC here (Ruby code is running), so no step is open.
    c->tracker->CloseOpenPeriod();
  }
  c->tracker->Drain(&c->periods);
  GcProfileData d;
  d.periods = c->periods;
  d.pauses = c->tracker->pauses();
  d.stats = c->tracker->stats();
  d.start_realtime_ns = c->start_realtime_ns;
  d.start_monotonic_ns = c->start_monotonic_ns;
  d.end_monotonic_ns = MonotonicNs();
  d.flush_interval_ns = c->tracker->config().flush_interval_ns;
  d.pid = static_cast<int64_t>(getpid());
  d.source = c->source;
  d.poll_interval_ns = c->source == GcSource::kCounters ? c->tracker->config().flush_interval_ns : 0;
  // The next flush covers what happens from now on (as the heap profile's
  // alloc_* values do): periodic files each hold their own window.
  c->periods.clear();
  c->tracker->ClearPauses();
  c->start_realtime_ns = RealtimeNs();
  c->start_monotonic_ns = d.end_monotonic_ns;
  return d;
}

// flush(format, gzip, stamp) -> String: :pprof (always gzipped) or :firefox
// (JSON, gzipped when gzip is true). Covers the window since start (or the
// previous flush, or the fork) and starts a new one; the collector keeps
// running. A failed encode raises (NoMemoryError, Fathom::Error) and loses
// that window (io/window_flush.h).
VALUE CollectorFlush(VALUE self, VALUE format, VALUE gzip, VALUE stamp) {
  GcCollector* c = Unwrap(self);
  return RubyMethod([&] {
    return FlushWindow(
        format, gzip, stamp, "gc_encode", [c] { return TakeData(Initialized(c)); },
        [](const GcProfileData& d) { return EncodeGcPprof(d); },
        [](const GcProfileData& d, bool zip) { return EncodeGcFirefox(d, zip); });
  });
}

// flush_into(parts): this window's GC periods into a FirefoxParts
// for one combined Firefox file; starts a new window.
VALUE CollectorFlushInto(VALUE self, VALUE parts) {
  GcCollector* c = Unwrap(self);
  FirefoxParts* p = UnwrapFirefoxParts(parts);
  return RubyMethod([&] {
    p->gc = std::make_unique<GcProfileData>(TakeData(Initialized(c)));
    return Qnil;
  });
}

VALUE CollectorStats(VALUE self) {
  GcCollector* c = Unwrap(self);
  return RubyMethod([&] {
    Initialized(c);
    const GcTracker::Stats& s = c->tracker->stats();
    const PauseHistogram& p = c->tracker->pauses();
    VALUE h = rb_hash_new();
    auto set = [&](const char* key, long long v) { rb_hash_aset(h, ID2SYM(rb_intern(key)), LL2NUM(v)); };
    bool counters = c->source == GcSource::kCounters;
    rb_hash_aset(h, ID2SYM(rb_intern("source")), counters ? sym_counters : sym_hooks);
    set("steps", static_cast<long long>(s.steps));
    set("cycles", static_cast<long long>(counters ? c->poll.stats().cycles : s.cycles));
    if (counters) {
      set("polls", static_cast<long long>(c->poll.stats().polls));
      set("polls_with_gc", static_cast<long long>(c->poll.stats().polls_with_gc));
    }
    set("periods", static_cast<long long>(counters ? c->poll.stats().periods : s.periods_closed));
    set("merged_on_overflow", static_cast<long long>(s.merged_on_overflow));
    set("unmatched_exits", static_cast<long long>(s.unmatched_exits));
    set("idle_steps", static_cast<long long>(s.idle_steps));
    set("drain_jobs", static_cast<long long>(c->drain_jobs));
    set("cpu_measured_steps", static_cast<long long>(s.cpu_measured_steps));
    set("descheduled_steps", static_cast<long long>(s.descheduled_steps));
    set("gc_wall_ns", static_cast<long long>(p.sum()));
    set("max_pause_ns", static_cast<long long>(p.max()));
    return h;
  });
}

}  // namespace

void InitGcCollector(VALUE mNative) {
  g_drain_job.Preregister();
  auto sym = [](const char* name) { return ID2SYM(rb_intern(name)); };
  sym_major_by = sym("major_by");
  sym_gc_by = sym("gc_by");
  sym_heap_live_slots = sym("heap_live_slots");
  sym_nofree = sym("nofree");
  sym_oldgen = sym("oldgen");
  sym_shady = sym("shady");
  sym_force = sym("force");
  sym_oldmalloc = sym("oldmalloc");
  sym_newobj = sym("newobj");
  sym_malloc = sym("malloc");
  sym_method = sym("method");
  sym_capi = sym("capi");
  sym_stress = sym("stress");
  sym_hooks = sym("hooks");
  sym_counters = sym("counters");
  sym_time = sym("time");
  sym_minor_gc_count = sym("minor_gc_count");
  sym_major_gc_count = sym("major_gc_count");
  sym_state = sym("state");
  sym_none = sym("none");
  // Both functions build their symbol tables on first use (which may
  // allocate): do it now, outside any GC, so the hooks never do. With a
  // Hash, not a Symbol: a key the GC does not have raises ArgumentError for
  // a Symbol, and Ruby 3.4's modular GC can load another GC whose GC.stat
  // lacks ours (MMTk: no :minor_gc_count, :heap_live_slots, :major_by;
  // docs/internals/versions.md, "The modular GC"). That must not make
  // `require "fathom"` fail: the GC profiler refuses to start instead, and
  // Fathom::RubyGuards refuses every feature that reads a missing key before
  // it starts (docs/internals/versions.md, "Ruby 4.0").
  VALUE stat = rb_hash_new(), info = rb_hash_new();
  rb_gc_stat(stat);
  rb_gc_latest_gc_info(info);
  auto need = [](VALUE hash, VALUE key) {
    if (rb_hash_lookup2(hash, key, Qundef) == Qundef) g_missing_gc_key = rb_id2name(SYM2ID(key));
  };
  for (VALUE key : {sym_heap_live_slots, sym_time, sym_minor_gc_count, sym_major_gc_count}) need(stat, key);
  for (VALUE key : {sym_major_by, sym_gc_by, sym_state}) need(info, key);

  VALUE klass = rb_define_class_under(mNative, "GcCollector", rb_cObject);
  rb_gc_register_mark_object(klass);
  rb_define_alloc_func(klass, CollectorAlloc);
  rb_define_method(klass, "initialize", RUBY_METHOD_FUNC(CollectorInitialize), 3);
  rb_define_method(klass, "poll", RUBY_METHOD_FUNC(CollectorPoll), 0);
  rb_define_method(klass, "start", RUBY_METHOD_FUNC(CollectorStart), 0);
  rb_define_method(klass, "stop", RUBY_METHOD_FUNC(CollectorStop), 0);
  rb_define_method(klass, "running?", RUBY_METHOD_FUNC(CollectorRunningP), 0);
  rb_define_method(klass, "flush", RUBY_METHOD_FUNC(CollectorFlush), 3);
  rb_define_method(klass, "flush_into", RUBY_METHOD_FUNC(CollectorFlushInto), 1);
  rb_define_method(klass, "after_fork_child", RUBY_METHOD_FUNC(CollectorAfterForkChild), 0);
  rb_define_method(klass, "stats", RUBY_METHOD_FUNC(CollectorStats), 0);
}

}  // namespace fathom
