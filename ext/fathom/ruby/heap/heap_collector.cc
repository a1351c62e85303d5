// Fathom::Native::HeapCollector, the Ruby class over the heap collector:
// lifecycle (alloc, initialize, start, stop), flush, stats,
// the GC glue (mark, compact, free) and the fork child's reset. Every
// method body runs through RubyMethod and every GC callback through NoThrow
// (boundary.h).
#include <algorithm>
#include <climits>
#include <random>
#include <string>
#include <sys/random.h>
#include <unistd.h>
#include <utility>
#include <vector>

#include "base/clock.h"
#include "heap/heap_schema.h"
#include "ruby/io/output_stamp_arg.h"
#include "ruby/runtime/boundary.h"
#include "ruby/keywords.h"
#include "ruby/native_class.h"
#include "ruby/init.h"
#include "ruby/runtime/symbols.h"
#include "ruby/io/firefox_parts.h"
#include "ruby/heap/heap_collector.h"
#include "ruby/heap/heap_tick.h"

namespace fathom {
namespace {

// ---------------------------------------------------------------- GC glue

void CollectorMark(void* ptr) {
  NoThrow("heap collector mark", [ptr] {
    HeapCollector* c = static_cast<HeapCollector*>(ptr);
    // Each distinct frame once, however many samples share it.
    c->store.stacks().ForEachFrameHandle([](uint64_t h) { rb_gc_mark_movable(static_cast<VALUE>(h)); });
    // Pending objects must survive (and not move) until CommitPending has
    // looked at them; they are strong references only for that short while.
    for (uint32_t index : c->store.pending()) {
      const SampleRecord& r = c->store.at(index);
      if (r.state != RecordState::kPending) continue;  // committed by a commit cut short
      rb_gc_mark(static_cast<VALUE>(r.object));
      rb_gc_mark(static_cast<VALUE>(r.thread));
    }
    c->tokens.Mark();
  });
}

// GC.compact moved objects: follow our frames, and in exact mode the live
// objects (not marked by us, but Ruby's forwarding addresses are valid for
// every moved object during the reference-update phase).
void CollectorCompact(void* ptr) {
  NoThrow("heap collector compact", [ptr] {
    HeapCollector* c = static_cast<HeapCollector*>(ptr);
    c->commit.label_cache_gc_count = SIZE_MAX;  // classes and threads may have moved
    if (c->busy_thread != Qnil) c->busy_thread = rb_gc_location(c->busy_thread);
    auto location = [](uint64_t h) { return static_cast<uint64_t>(rb_gc_location(static_cast<VALUE>(h))); };
    c->store.stacks().RemapFrameHandles(location);
    c->store.RemapObjects(location);
    c->tokens.UpdateAfterCompaction();
  });
}

// A running collector is a GC root, so this runs only for stopped ones —
// except at VM shutdown, when Ruby frees every object: then stop the timer
// thread (it would arm hooks for a freed collector) and leave the hooks
// installed but inert (they check the globals first).
void CollectorFree(void* ptr) {
  NoThrow("heap collector free", [ptr] {
    HeapCollector* c = static_cast<HeapCollector*>(ptr);
    if (g_active == c) {
      if (!c->exact) HeapTick::Stop(/*unwatch_threads=*/false);
      g_active = nullptr;
    }
    if (g_freeobj_owner == c) g_freeobj_owner = nullptr;
    delete c;
  });
}

size_t CollectorSize(const void* ptr) {
  const HeapCollector* c = static_cast<const HeapCollector*>(ptr);
  return sizeof(*c) + c->store.capacity() * sizeof(SampleRecord) + c->store.stacks().stack_count() * 64;
}

const rb_data_type_t kHeapCollectorType =
    DataType("Fathom::Native::HeapCollector", CollectorMark, CollectorFree, CollectorSize, CollectorCompact);

// Raises TypeError (a longjmp) for a wrong receiver: call it before any C++
// object is alive in the method body.
HeapCollector* Unwrap(VALUE self) { return fathom::Unwrap<HeapCollector>(self, kHeapCollectorType); }

}  // namespace

HeapCollector* UnwrapHeapCollector(VALUE self) { return Unwrap(self); }

namespace {

// ---------------------------------------------------------------- lifecycle

// initialize(exact:, interval_ns:, max_depth:, liveness:), as
// Fathom::HeapProfiler validated them (ruby/keywords.h): liveness
// :object_id or :weakmap (liveness_tokens.h).
VALUE CollectorInitialize(int argc, VALUE* argv, VALUE self) {
  HeapCollector* c = Unwrap(self);
  return RubyMethod([&] {
    if (c->max_depth != 0) ThrowFathomError("fathom: collector is already initialized");
    Keywords options(argc, argv, {"exact", "interval_ns", "max_depth", "liveness"}, "Fathom::Native::HeapCollector.new");
    TokenKind liveness = LivenessTokens::ParseKind(options.Get("liveness"));
    c->exact = options.Boolean("exact");
    c->interval_ns = static_cast<uint64_t>(options.Integer("interval_ns", 1));
    c->max_depth = static_cast<int>(std::min<int64_t>(options.Integer("max_depth", 1), INT_MAX - 1));
    c->store.set_exact(c->exact);
    c->tokens = LivenessTokens(liveness);
    return self;
  });
}

void SeedRng(HeapCollector* c) {
  // Seeded per process (and again after fork) so forked workers do not all
  // sample the same allocations, as an unseeded generator would.
  // getrandom(2), not std::random_device: the precompiled gem links
  // libstdc++ statically, and GCC 12's random_device then needs glibc
  // 2.36's arc4random, which would raise the gem's glibc floor from 2.34
  // (docs/internals/versions.md, "The precompiled gem"). Without entropy
  // (a seccomp filter), pid and clock still differ between workers.
  unsigned entropy = 0;
  if (getrandom(&entropy, sizeof(entropy), GRND_NONBLOCK) != static_cast<ssize_t>(sizeof(entropy))) entropy = 0;
  c->rng.seed(entropy ^ static_cast<unsigned>(getpid()) ^ static_cast<unsigned>(MonotonicNs()));
}

void Deactivate() {
  g_active = nullptr;
  g_active_self = Qnil;
}

VALUE CollectorStart(VALUE self) {
  HeapCollector* c = Unwrap(self);
  return RubyMethod([&] {
    if (c->running) return self;
    if (g_active) ThrowFathomError("fathom: another heap profiler is already running in this process");
    if (c->max_depth == 0) ThrowFathomError("fathom: collector was not initialized");

    c->hooks.frames.assign(static_cast<size_t>(c->max_depth) + 1, Qnil);
    c->hooks.lines.assign(static_cast<size_t>(c->max_depth) + 1, 0);
    c->hooks.handles.assign(static_cast<size_t>(c->max_depth) + 1, 0);
    c->hooks.burst.clear();
    c->hooks.burst.reserve(kBurstCandidates);
    if (c->store.live_count() == 0) {
      ResetWindow(c);
      if (!c->exact) NoteStartSlots(&c->census);
    } else if (!c->exact) {
      InvalidateCensus(&c->census, "restarted with samples from before the stop (the gap was not sampled)");
    }
    SeedRng(c);
    c->liveness_lost = false;

    g_active = c;
    g_active_self = self;
    if (c->exact) {
      if (g_freeobj_owner != c) {
        ReleaseFreeobjOwnership();
        g_freeobj_owner = c;
        g_freeobj_owner_self = self;
        AddFreeobjHook();
      }
      // Records from before a lost hook keep no handle; new ones do.
      c->store.WatchObjects();
      AddNewobjHook();
    } else {
      ReleaseFreeobjOwnership();
      c->hooks.last_total_allocated = TotalAllocatedObjects();
      std::string error;
      bool started = false;
      try {
        started = HeapTick::Start(c->interval_ns, &g_arm_job, &error);
      } catch (...) {
        Deactivate();
        throw;
      }
      if (!started) {
        Deactivate();
        ThrowFathomError("fathom: %s", error.c_str());
      }
    }
    c->running = true;
    return self;
  });
}

VALUE CollectorStop(VALUE self) {
  HeapCollector* c = Unwrap(self);
  return RubyMethod([&] {
    if (!c->running) return self;
    if (c->exact) {
      RemoveNewobjHook();
      // FREEOBJ stays until a flush has reported the records: flush after
      // stop (the block form does stop, then flush) must still know which
      // objects died.
    } else {
      HeapTick::Stop();
      EndBurst(c);
      NoteCensusStop(&c->census);
    }
    c->running = false;
    Deactivate();
    // Last: the collector is stopped even if this fails (and the records
    // left pending are committed by the next flush).
    CommitPending(c);
    return self;
  });
}

// Before Ractor.new (RactorCheck): an exact collector keeps its FREEOBJ hook
// after stop until a flush, and on Ruby 3.1.0-3.1.3 any GC-event hook that
// is installed while another Ractor allocates crashes Ruby (bug #18464; seen
// here: 6 of 100 runs of test/crash/ractor_test.rb's script segfaulted in a
// Ractor's allocation). So the hook goes now; the records keep what FREEOBJ
// told them so far and are reported as not alive ("lost" liveness).
VALUE CollectorReleaseLivenessHook(VALUE self) {
  HeapCollector* c = Unwrap(self);
  return RubyMethod([&] {
    if (!c->running && g_freeobj_owner == c) ReleaseFreeobjOwnership();
    return self;
  });
}

VALUE CollectorRunningP(VALUE self) {
  HeapCollector* c = Unwrap(self);
  return RubyMethod([c] { return c->running ? Qtrue : Qfalse; });
}

VALUE CollectorFlush(VALUE self, VALUE gc, VALUE stamp) {
  HeapCollector* c = Unwrap(self);
  VALUE result = RubyMethod([&] { return FlushHeapProfile(c, RTEST(gc), nullptr, OutputStampArg(stamp)); });
  RB_GC_GUARD(self);
  return result;
}

// flush_into(parts, gc) -> ["", stats]: the flush, with the rows and their
// sampled allocations moved into a FirefoxParts instead of encoded.
VALUE CollectorFlushInto(VALUE self, VALUE parts, VALUE gc) {
  HeapCollector* c = Unwrap(self);
  FirefoxParts* p = UnwrapFirefoxParts(parts);
  VALUE result = RubyMethod([&] { return FlushHeapProfile(c, RTEST(gc), p); });
  RB_GC_GUARD(self);
  RB_GC_GUARD(parts);
  return result;
}

// keep_alloc_events = bool: keep each sampled allocation's time and thread
// (~40 bytes a sample until the flush) for flush_into's Firefox timeline.
VALUE CollectorSetKeepAllocEvents(VALUE self, VALUE keep) {
  HeapCollector* c = Unwrap(self);
  return RubyMethod([&] {
    c->store.set_keep_alloc_events(RTEST(keep));
    return keep;
  });
}

// ---------------------------------------------------------------- misc

VALUE CollectorAfterForkChild(VALUE self) {
  HeapCollector* c = Unwrap(self);
  return RubyMethod([&] {
    // Threads other than the forking one are gone: so is any flush in
    // progress, and the parent's samples describe the parent.
    c->flushing = false;
    c->commit.committing = false;
    c->busy_depth = 0;
    c->busy_thread = Qnil;
    c->store.Clear();
    c->hooks.burst.clear();  // its indices were the parent's records
    c->tokens.Reset();
    c->liveness_lost = false;
    SeedRng(c);
    ResetWindow(c);
    if (c->running && !c->exact) {
      NoteStartSlots(&c->census);  // the child's window starts now, in the parent's heap
      c->hooks.last_total_allocated = TotalAllocatedObjects();
      HeapTick::hook_armed.store(false);
      RemoveNewobjHook();
      HeapTick::AfterForkChild();
    } else if (!c->exact) {
      InvalidateCensus(&c->census, "forked while stopped");
    }
    return self;
  });
}

// The longest a census slice holds the GVL, in ns (0: no limit). Not a
// user option: tests set it to walk one page a slice.
VALUE CollectorSetCensusSliceNs(VALUE self, VALUE ns) {
  HeapCollector* c = Unwrap(self);
  return RubyMethod([&] {
    long long v = NUM2LL(ns);
    if (v < 0) ThrowArgumentError("fathom: census_slice_ns must be >= 0, got %lld", v);
    c->census.slice_ns = v;
    return ns;
  });
}

// How long a flush's census may take in wall time before it walks the rest
// in one slice, in ns (kCensusMaxWallNs). Not a user option: tests set it.
VALUE CollectorSetCensusMaxWallNs(VALUE self, VALUE ns) {
  HeapCollector* c = Unwrap(self);
  return RubyMethod([&] {
    long long v = NUM2LL(ns);
    if (v <= 0) ThrowArgumentError("fathom: census_max_wall_ns must be > 0, got %lld", v);
    c->census.max_wall_ns = v;
    return ns;
  });
}

VALUE CollectorSetCensus(VALUE self, VALUE on) {
  HeapCollector* c = Unwrap(self);
  return RubyMethod([&] {
    c->census.enabled = RTEST(on);
    return on;
  });
}

VALUE CollectorStats(VALUE self) {
  HeapCollector* c = Unwrap(self);
  return RubyMethod([&] {
    VALUE h = rb_hash_new();
    auto set = [&](const char* key, unsigned long long v) { rb_hash_aset(h, ID2SYM(rb_intern(key)), ULL2NUM(v)); };
    HeapTick::Stats t = HeapTick::stats();
    set("samples_taken", c->hooks.samples_taken);
    set("commits", c->commit.commits);
    set("untracked_samples", c->commit.untracked);
    set("samples_thinned", c->commit.thinned);
    set("thin_threshold", static_cast<unsigned long long>(c->commit.thinning.threshold()));
    set("records", c->store.live_count());
    set("stacks", c->store.stacks().stack_count());
    set("frames", c->store.stacks().frame_count());
    set("flushes", c->window.flushes);
    set("timer_ticks", t.ticks);
    set("timer_signals", t.signals_sent);
    set("timer_misses", t.handler_misses);
    // timer_jobs: ticks whose job ran in Ruby; against timer_ticks less the
    // two kinds of skipped ticks, it says whether ticks reached Ruby.
    set("timer_jobs", t.jobs_run);
    set("timer_triggers", t.jobs_registered);
    set("timer_armed_skips", t.armed_skips);
    set("timer_idle_ticks", t.idle_ticks);
    set("bursts", c->hooks.bursts);
    set("census_refreshes", c->census.refreshes);
    if (!c->exact) set("window_lost_ticks", WindowTicks(*c).lost());
    rb_hash_aset(h, ID2SYM(rb_intern("timer_mechanism")), rb_str_new_cstr(HeapTick::mechanism()));
    rb_hash_aset(h, ID2SYM(rb_intern("liveness")), rb_str_new_cstr(LivenessName(*c)));
    return h;
  });
}

}  // namespace

void ReleaseFreeobjOwnership() {
  if (!g_freeobj_owner) return;
  RemoveFreeobjHook();
  // Nothing reports its records' deaths any more: their object handles
  // must never be followed again (SampleStore::ForgetObjects).
  g_freeobj_owner->store.ForgetObjects();
  g_freeobj_owner->liveness_lost = true;
  g_freeobj_owner = nullptr;
  g_freeobj_owner_self = Qnil;
}

// HeapCollector.sample_types: [[type, unit], ...], the heap profile's
// sample types in the order the encoder writes them (core/heap/
// heap_schema.h). The tests compare a decoded profile with it, so a new
// sample type changes no test but its own.
VALUE CollectorSampleTypes(VALUE) {
  VALUE out = rb_ary_new();
  for (const SampleField<HeapValues>& f : HeapValues::kSchema)
    rb_ary_push(out, rb_ary_new_from_args(2, rb_str_new_cstr(f.type), rb_str_new_cstr(f.unit)));
  return out;
}

void InitHeapCollector(VALUE mNative) {
  InitAllocationHooks();
  InitSampleCommit();
  InitHeapFlush();
  rb_gc_register_address(&g_active_self);
  rb_gc_register_address(&g_freeobj_owner_self);

  // Objects cached in C statics must be pinned: GC.compact would move them.
  VALUE klass = rb_define_class_under(mNative, "HeapCollector", rb_cObject);
  rb_gc_register_mark_object(klass);
  rb_define_alloc_func(klass, Allocate<HeapCollector, &kHeapCollectorType>);
  DefineMethods(klass, {{"initialize", Method(CollectorInitialize)}, {"start", Method(CollectorStart)},
                        {"stop", Method(CollectorStop)}, {"running?", Method(CollectorRunningP)},
                        {"release_liveness_hook", Method(CollectorReleaseLivenessHook)},
                        {"flush", Method(CollectorFlush)}, {"flush_into", Method(CollectorFlushInto)},
                        {"keep_alloc_events=", Method(CollectorSetKeepAllocEvents)},
                        {"after_fork_child", Method(CollectorAfterForkChild)}, {"stats", Method(CollectorStats)},
                        {"census=", Method(CollectorSetCensus)}, {"census_slice_ns=", Method(CollectorSetCensusSliceNs)},
                        {"census_max_wall_ns=", Method(CollectorSetCensusMaxWallNs)}});
  DefineLiveObjectMethods(klass);
  rb_define_singleton_method(klass, "sample_types", RUBY_METHOD_FUNC(CollectorSampleTypes), 0);
}

}  // namespace fathom
