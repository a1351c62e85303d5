// Fathom::Native::CpuCollector — where CPU and wall time go, per thread.
//
// The signal side (cpu_sampler.h) writes samples into this collector's
// SampleRing; everything else happens here, with the GVL, off the signal
// path:
//   - drain: records move from the ring into a CpuAggregate (stacks
//     interned, summed per stack/thread/state). A postponed job does it when
//     the ring is an eighth full, lib/'s drain thread every 50 ms (threads
//     all asleep on Ruby < 3.3 run no job), and flush before encoding;
//   - frames are marked for the GC: the aggregate's movable (remapped after
//     GC.compact), the ring's not-yet-drained ones pinned;
//   - flush: the window taken out with the GVL (cpu_window.cc: frames
//     symbolized, the data copied), then the pprof or Firefox profile
//     encoded and gzipped without the GVL.
#include "ruby/io/window_flush.h"
#include "ruby/cpu/cpu_collector.h"

#include <algorithm>
#include <climits>
#include <memory>
#include <string>

#include "native/native_capture.h"
#include "native/native_stack_resolver.h"
#include "ruby/init.h"
#include "ruby/io/firefox_parts.h"
#include "ruby/runtime/boundary.h"
#include "ruby/keywords.h"
#include "ruby/native_class.h"
#include "ruby/runtime/postponed_job.h"

namespace fathom {
namespace {

// Ring cells: 2048 at the default max_depth 128 (3 MB): at the default
// 10 ms and 8 busy threads, 25 s of samples; at 100 us, ~250 ms — the drain
// job and thread keep far ahead of that. Deeper stacks get fewer cells
// (at least 256) so the ring stays within ~13 MB.
size_t RingCapacity(int max_depth) {
  size_t cells = 2048 * 128 / static_cast<size_t>(max_depth);
  return cells < 256 ? 256 : cells > 2048 ? 2048 : cells;
}

VALUE sym_cpu, sym_wall;

}  // namespace

CpuCollector* g_active_cpu = nullptr;  // the one the sampler writes into

namespace {
VALUE g_active_self = Qnil;  // kept alive (a GC root) while running

void DrainJob(void*) {
  NoThrow("cpu drain job", [] {
    if (g_active_cpu == nullptr) return;
    g_active_cpu->drain_jobs++;
    cpu::Drain(g_active_cpu);
  });
}

PostponedJob g_drain_job(DrainJob);

// A watched thread ends: keep its name for the profile. Kept whether or not
// a sample of it has been drained yet: the timer thread may still be
// publishing one it took for this thread (a blocked thread's wall sample)
// when the thread leaves, and that sample would then carry no name (seen on
// 3.3: a track "thread 12471" for a thread named t1). The window's encode
// drops names of threads that have no sample.
void OnThreadEnd(int32_t tid, VALUE thread) {
  CpuCollector* c = g_active_cpu;
  if (c == nullptr) return;
  cpu::Drain(c);
  c->agg.ForgetThread(tid);  // its native thread id may be the next thread's (3.1)
  c->ended_names[tid] = cpu::NameOf(thread, tid);
}

// ---------------------------------------------------------------- GC glue

void CollectorMark(void* ptr) {
  NoThrow("cpu collector mark", [ptr] {
    CpuCollector* c = static_cast<CpuCollector*>(ptr);
    c->agg.stacks().ForEachFrameHandle([](uint64_t h) { rb_gc_mark_movable(static_cast<VALUE>(h)); });
    // Published but not yet drained: pinned, so the handles stay valid (and
    // in place) until the drain interns them.
    if (c->ring)
      c->ring->ForEachPending([](const SampleHeader& h, const uint64_t* frames, const int32_t*) {
        for (uint16_t i = 0; i < h.depth; i++) rb_gc_mark(static_cast<VALUE>(frames[i]));
      });
  });
}

void CollectorCompact(void* ptr) {
  NoThrow("cpu collector compact", [ptr] {
    CpuCollector* c = static_cast<CpuCollector*>(ptr);
    c->agg.stacks().RemapFrameHandles(
        [](uint64_t h) { return static_cast<uint64_t>(rb_gc_location(static_cast<VALUE>(h))); });
  });
}

// A running collector is a GC root, so this runs for stopped ones, or for
// every object at VM shutdown: then stop the sampler first.
void CollectorFree(void* ptr) {
  NoThrow("cpu collector free", [ptr] {
    CpuCollector* c = static_cast<CpuCollector*>(ptr);
    if (g_active_cpu == c) {
      CpuSampler::Stop();
      g_active_cpu = nullptr;
      g_active_self = Qnil;
    }
    delete c;
  });
}

size_t CollectorSize(const void* ptr) {
  const CpuCollector* c = static_cast<const CpuCollector*>(ptr);
  size_t ring = c->ring ? c->ring->capacity() * (sizeof(SampleHeader) + 8 + c->ring->max_depth() * 12 +
                                                  c->ring->native_max() * sizeof(uintptr_t))
                        : 0;
  return sizeof(*c) + ring + c->agg.size() * 48 + c->agg.stacks().stack_count() * 64;
}

const rb_data_type_t kCpuCollectorType =
    DataType("Fathom::Native::CpuCollector", CollectorMark, CollectorFree, CollectorSize, CollectorCompact);

CpuCollector* Unwrap(VALUE self) { return fathom::Unwrap<CpuCollector>(self, kCpuCollectorType); }

CpuCollector* Initialized(CpuCollector* c) {
  if (!c->ring) ThrowFathomError("fathom: CPU collector was not initialized");
  return c;
}

// initialize(mode:, interval_ns:, max_depth:, timeline:, native:), as
// Fathom::CpuProfiler validated them (ruby/keywords.h): mode :cpu or
// :wall; timeline: keep every sample in order (for the Firefox Profiler
// format); native: each sample also holds its C frames (core/native/).
VALUE CollectorInitialize(int argc, VALUE* argv, VALUE self) {
  CpuCollector* c = Unwrap(self);
  return RubyMethod([&] {
    if (c->ring) ThrowFathomError("fathom: CPU collector is already initialized");
    Keywords options(argc, argv, {"mode", "interval_ns", "max_depth", "timeline", "native"},
                     "Fathom::Native::CpuCollector.new");
    VALUE mode = options.Get("mode");
    if (mode != sym_cpu && mode != sym_wall) ThrowArgumentError("fathom: mode must be :cpu or :wall");
    c->config.mode = mode == sym_wall ? CpuMode::kWall : CpuMode::kCpu;
    c->config.interval_ns = options.Integer("interval_ns", 1);
    int depth = static_cast<int>(std::min<int64_t>(options.Integer("max_depth", 1), INT_MAX));
    c->max_depth = depth;
    c->config.native = options.Boolean("native");
    if (c->config.native) InitNativeCapture();  // dlopen, warm-up: never in a handler
    c->ring = std::make_unique<SampleRing>(RingCapacity(depth), static_cast<size_t>(depth),
                                           c->config.native ? kMaxNativeFrames : 0);
    c->agg.set_keep_timeline(options.Boolean("timeline"));
    c->agg.set_mode(c->config.mode);
    return self;
  });
}

VALUE CollectorStart(VALUE self) {
  CpuCollector* c = Unwrap(self);
  return RubyMethod([&] {
    Initialized(c);
    if (c->running) return self;
    if (g_active_cpu != nullptr || CpuSampler::running())
      ThrowFathomError("fathom: another CPU or wall profiler is already running in this process");
    if (c->agg.size() == 0) cpu::ResetWindow(c);
    // Threads may have ended unseen while stopped: no previous stacks.
    c->agg.ForgetThreads();
    g_active_cpu = c;
    g_active_self = self;
    std::string error;
    if (!CpuSampler::Start(c->ring.get(), c->config, &g_drain_job, OnThreadEnd, &error)) {
      g_active_cpu = nullptr;
      g_active_self = Qnil;
      ThrowFathomError("fathom: cannot start the %s profiler: %s", CpuModeName(c->config.mode), error.c_str());
    }
    c->running = true;
    return self;
  });
}

VALUE CollectorStop(VALUE self) {
  CpuCollector* c = Unwrap(self);
  return RubyMethod([&] {
    Initialized(c);
    if (!c->running) return self;
    CpuSampler::Stop(/*account_blocked=*/true);
    c->running = false;
    cpu::Drain(c);
    g_active_cpu = nullptr;
    g_active_self = Qnil;
    return self;
  });
}

VALUE CollectorRunningP(VALUE self) {
  CpuCollector* c = Unwrap(self);
  // The sampler stops by itself at exit (cpu_sampler.cc, StopAtExit).
  return RubyMethod([c] { return Initialized(c)->running && CpuSampler::running() ? Qtrue : Qfalse; });
}

VALUE CollectorDrain(VALUE self) {
  CpuCollector* c = Unwrap(self);
  return RubyMethod([&] {
    cpu::Drain(Initialized(c));
    return Qnil;
  });
}

// Fathom::Native.internal_thread(bool), called by lib/'s helper threads on
// themselves (Fathom::InternalThread): Fathom's own sleeping threads are
// not sampled by any CPU/wall profile.
VALUE NativeInternalThread(VALUE, VALUE internal) {
  return RubyMethod([&] {
    CpuSampler::SetCurrentThreadInternal(RTEST(internal));
    return Qnil;
  });
}

// In a forked child: the child profiles itself (its only thread), from an
// empty window.
VALUE CollectorAfterForkChild(VALUE self) {
  CpuCollector* c = Unwrap(self);
  return RubyMethod([&] {
    Initialized(c);
    c->ring->Drain([](const SampleHeader&, const uint64_t*, const int32_t*) {});
    c->agg.Clear();
    c->agg.ForgetThreads();  // the parent's threads
    c->ended_names.clear();
    cpu::ResetWindow(c);
    if (c->running) CpuSampler::AfterForkChild();
    return self;
  });
}

// flush(format, gzip, stamp) -> String: :pprof (always gzipped) or :firefox
// (JSON, gzipped when gzip; needs timeline: true at initialize). Covers the
// window since start (or the previous flush, or the fork) and starts a new
// one (io/window_flush.h).
VALUE CollectorFlush(VALUE self, VALUE format, VALUE gzip, VALUE stamp) {
  CpuCollector* c = Unwrap(self);
  return RubyMethod([&] {
    return FlushWindow(
        format, gzip, stamp, "cpu_encode", [c] { return cpu::TakeData(Initialized(c)); },
        [](const CpuProfileData& d) { return EncodeCpuPprof(d); },
        [](const CpuProfileData& d, bool zip) { return EncodeCpuFirefox(d, zip); });
  });
}

// flush_into(parts): this window's data into a FirefoxParts for one
// combined Firefox file (needs timeline: true); starts a new window.
VALUE CollectorFlushInto(VALUE self, VALUE parts) {
  CpuCollector* c = Unwrap(self);
  FirefoxParts* p = UnwrapFirefoxParts(parts);
  return RubyMethod([&] {
    if (!c->agg.keep_timeline())
      ThrowArgumentError("fathom: the CPU profiler keeps a timeline only with format :firefox");
    p->cpu = std::make_unique<CpuProfileData>(cpu::TakeData(Initialized(c)));
    return Qnil;
  });
}

VALUE CollectorStats(VALUE self) {
  CpuCollector* c = Unwrap(self);
  return RubyMethod([&] {
    Initialized(c);
    CpuSampler::Stats s = CpuSampler::stats();
    VALUE h = rb_hash_new();
    auto set = [&](const char* key, long long v) { rb_hash_aset(h, ID2SYM(rb_intern(key)), LL2NUM(v)); };
    rb_hash_aset(h, ID2SYM(rb_intern("mode")), c->config.mode == CpuMode::kWall ? sym_wall : sym_cpu);
    set("interval_ns", c->config.interval_ns);
    set("samples", static_cast<long long>(c->ring->written()));
    set("dropped", static_cast<long long>(c->ring->dropped()));
    set("pending", static_cast<long long>(c->ring->pending()));
    // For the drain thread's period (lib/fathom/profilers/cpu_profiler.rb):
    // how many samples the ring holds, and whether the handler can have the
    // drain job run from any thread (3.3+) or only from a GVL holder.
    set("ring_capacity", static_cast<long long>(c->ring->capacity()));
    set("drain_job_from_any_thread", g_drain_job.TriggersFromAnyThread() ? 1 : 0);
    set("signals", static_cast<long long>(s.signals));
    set("ignored_signals", static_cast<long long>(s.foreign_signals));
    set("timer_errors", static_cast<long long>(s.timer_errors));
    set("threads_seen", static_cast<long long>(s.threads_seen));
    set("window_samples", c->window_samples);
    set("window_threads", c->window_threads);
    set("threads_sampled_now", s.threads_now);
    set("drains", static_cast<long long>(c->drains));
    set("drain_jobs", static_cast<long long>(c->drain_jobs));
    set("stacks", static_cast<long long>(c->agg.stacks().stack_count()));
    rb_hash_aset(h, ID2SYM(rb_intern("states")), rb_str_new_cstr(CpuSampler::state_source()));
    return h;
  });
}

}  // namespace

void InitCpuCollector(VALUE mNative) {
  g_drain_job.Preregister();
  InitCpuSampler();
  sym_cpu = ID2SYM(rb_intern("cpu"));
  sym_wall = ID2SYM(rb_intern("wall"));
  cpu::InitWindow();
  rb_gc_register_address(&g_active_self);

  DefineModuleFunctions(mNative, {{"internal_thread", Method(NativeInternalThread)}});
  VALUE klass = rb_define_class_under(mNative, "CpuCollector", rb_cObject);
  rb_gc_register_mark_object(klass);
  rb_define_alloc_func(klass, Allocate<CpuCollector, &kCpuCollectorType>);
  DefineMethods(klass, {{"initialize", Method(CollectorInitialize)}, {"start", Method(CollectorStart)},
                        {"stop", Method(CollectorStop)}, {"running?", Method(CollectorRunningP)},
                        {"drain", Method(CollectorDrain)}, {"flush", Method(CollectorFlush)},
                        {"after_fork_child", Method(CollectorAfterForkChild)}, {"stats", Method(CollectorStats)},
                        {"flush_into", Method(CollectorFlushInto)}});
}

}  // namespace fathom
