// The heap collector's flush: one heap profile of the window since the last
// flush. With the GVL (yielded periodically): commit pending records, decide
// each record's liveness and size, let SampleStore::Report aggregate them,
// symbolize the frames, copy the rows out (HeapProfileRows). Without it:
// encode and gzip.
//
// The flush calls Ruby (liveness lookups, symbolizing) and yields the GVL, where a
// Thread#raise can land: a longjmp that skips C++ destructors. So all its
// C++ state lives in a heap FlushState owned outside Protect, the code
// under Protect keeps no non-trivial locals alive across a yield, and what
// a longjmp skips (busy and committing flags) is reset by FlushScope.
#include <algorithm>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/clock.h"
#include "ruby/runtime/boundary.h"
#include "ruby/fork/fork_child_reset.h"
#include "ruby/runtime/symbols.h"
#include "heap/heap_encode.h"
#include "ruby/io/firefox_parts.h"
#include "ruby/heap/heap_collector.h"
#include "ruby/heap/heap_tick.h"
#include "labels/label_sets.h"

#include <unistd.h>

namespace fathom {
namespace {

// The flush yields the GVL after holding it this long.
constexpr int64_t kMaxGvlHoldNs = 2000000;  // 2 ms

struct FlushState {
  HeapCollector* c = nullptr;
  bool gc = false;
  FirefoxParts* parts = nullptr;  // flush_into: rows go here, not encoded
  OutputStamp stamp;              // flush: who wrote it, written by the encoder
  std::unique_ptr<HeapAggregator> aggregator;
  std::vector<uint32_t> frames_to_symbolize;
  std::unique_ptr<HeapProfileRowsBuilder> rows_builder;  // copies rows in batches, yielding between
  HeapProfileRows rows;
  std::string bytes;
  VALUE result = Qnil;  // [bytes, stats]
  // Statistics.
  int64_t started_ns = 0, walk_ns = 0, symbolize_ns = 0, encode_ns = 0;
  int64_t hold_started_ns = 0, max_hold_ns = 0;
  uint64_t records = 0, live = 0, freed = 0, drained = 0, yields = 0;
  // The live census (live_census.h): why it did not run (nullptr: it ran),
  // what it counted, how long it took.
  const char* census_off = nullptr;
  LiveStrata strata;
  CensusProgress census;  // the census in slices; its strata move to `strata`
  std::unordered_map<uint64_t, std::string> class_names;  // of the census's classes
  uint64_t stratified = 0;      // live records whose object was certainly new
  uint64_t dead_by_census = 0;  // records found dead by the census's slots
  int64_t census_ns = 0;
  size_t census_gc_count = 0;
  int64_t census_started_ns = INT64_MAX;
  bool enable_gc_after_walk = false;  // we disabled GC for the census and the walk
  int64_t census_begin_ns = 0;  // listing the pages (and Ruby finishing a lazy sweep)
  bool census_rushed = false;  // past its wall-time bound, the census ended in one slice
};

// Flushes whose census turned GC off and have not turned it back on (GVL
// held). The census yields the GVL with GC off, so another thread may fork
// meanwhile: the flush never ends in that child, which would run with GC
// off for good. TurnGcBackOnInChild (fork/fork_child_reset.h) turns it
// back on there.
int g_census_gc_off = 0;

void TurnGcOffForCensus(FlushState* f) {
  f->enable_gc_after_walk = !RTEST(rb_gc_disable());
  if (f->enable_gc_after_walk) g_census_gc_off++;
}

void TurnGcBackOn(FlushState* f) {
  if (!f->enable_gc_after_walk) return;
  f->enable_gc_after_walk = false;
  // 0 already in a child forked by this very thread (a trap handler run
  // while the census yielded forked): the reset turned GC on there.
  if (g_census_gc_off > 0) g_census_gc_off--;
  rb_gc_enable();
}

void TurnGcBackOnInChild() {
  if (g_census_gc_off == 0) return;
  g_census_gc_off = 0;
  rb_gc_enable();
}

// Ends a stretch of holding the GVL (for the statistics).
void EndHold(FlushState* f) {
  int64_t held = MonotonicNs() - f->hold_started_ns;
  f->max_hold_ns = std::max(f->max_hold_ns, held);
}

// Yields the GVL if another thread wants it and we have held it for long.
// rb_thread_schedule only switches when some thread is waiting.
void MaybeYield(FlushState* f) {
  if (MonotonicNs() - f->hold_started_ns < kMaxGvlHoldNs || rb_thread_alone()) return;
  EndHold(f);
  rb_thread_schedule();  // may run interrupts, and raise: we are under Protect
  f->yields++;
  f->hold_started_ns = MonotonicNs();
}

// Sampled mode: a record's object if it is still alive, else Qundef.
// in_census: the record was committed before the census walked its page
// (census_pages.h), so its object, if alive and certainly new, is one the
// census counted: only those are calibrated. A record committed after is
// in no census (other threads allocated while the census yielded) and
// keeps its plain estimate.
// For records committed before their page's walk, two shortcuts: a slot
// the census found free holds no object, so ours is dead; and while no GC
// has run since, the object in an occupied slot is ours iff its id is our
// token (object_id tokens: LookupAt, which raises nothing, where a dead
// _id2ref lookup raises an exception the walk would leave behind as
// garbage). A record committed before the census began whose address is
// on no walked page is dead: GC is off from the census on, so every page
// that held a live object then was walked.
VALUE FindSampledObject(FlushState* f, uint32_t i, bool* in_census) {
  HeapCollector* c = f->c;
  const SampleRecord& r = c->store.at(i);
  *in_census = false;
  if (!f->census.occupied_now.empty()) {
    int64_t stamp = 0;
    bool walked = f->census.pages.StampAt(r.object, &stamp);
    if (walked && r.alloc_time_ns < stamp) {
      *in_census = true;
      if (!f->census.occupied_now.WasOccupied(r.object)) {
        f->dead_by_census++;
        return Qundef;
      }
      if (c->tokens.kind() == TokenKind::kObjectId && rb_gc_count() == f->census_gc_count) {
        VALUE obj = SlotHoldsSampleableObject(r.object) ? c->tokens.LookupAt(r.liveness_token, r.object) : Qundef;
        if (obj == Qundef) f->dead_by_census++;
        return obj;
      }
    } else if (!walked && r.alloc_time_ns < f->census_started_ns) {
      f->dead_by_census++;
      return Qundef;
    }
  }
  return c->tokens.Lookup(r.liveness_token);
}

void WalkRecords(FlushState* f) {
  FATHOM_FAULT_POINT("heap_flush_walk");
  HeapCollector* c = f->c;
  SampleStore& store = c->store;
  // Records appended while we yield belong to the next flush.
  uint32_t end = store.capacity();
  for (uint32_t i = 0; i < end; i++) {
    if ((i & 255) == 0) MaybeYield(f);
    // Re-read after every Ruby call: they can append to the record vector.
    // Freed records are folded by DrainFreed (they are on its list).
    if (!store.is_live(i)) continue;
    f->records++;

    bool alive = false;
    size_t inuse_size = 0;
    Stratum stratum;
    if (!c->liveness_lost) {
      if (c->exact) {
        // A record from before a lost FREEOBJ hook (a restart since) has
        // no object any more: not alive, recycled.
        alive = store.object_known(i);
        if (alive) inuse_size = MemsizeOf(static_cast<VALUE>(store.at(i).object));
      } else {
        bool in_census = false;
        VALUE obj = FindSampledObject(f, i, &in_census);
        if (obj != Qundef) {
          alive = true;
          inuse_size = MemsizeOf(obj);
          if (!f->census_off && in_census) stratum = LiveStratum(c->census, obj, inuse_size);
        }
      }
    }
    if (stratum.valid()) f->stratified++;
    store.Report(i, alive, inuse_size, f->aggregator.get(), stratum);
    if (alive) {
      f->live++;
    } else {
      f->freed++;
    }
  }
}

// The census is taken before the records are walked: the walk allocates
// (on Ruby < 3.2.3 a dead sample's object_id lookup raises: an exception,
// its message and backtrace each), and those objects, new and never
// sampled, would be counted as live bytes no sample reached.
//
// In slices of at most census.slice_ns of GVL, yielding between them when
// another thread waits (docs/internals/heap.md, "A census in slices"): the
// walk of a heap of millions of objects takes tens of ms, which held in
// one go was the app's pause at every flush. Each slice first commits what
// was sampled while we yielded, so that every record committed before a
// slice's stamp was sampled before it. Alone (no other thread) or on a
// small heap it is one slice.
//
// GC stays off from the census to the end of the walk, also after
// flush(gc: true) (whose GC ran just before): the walk yields the GVL, and
// under load the other threads' allocations ran a GC in that window often
// enough that 2 of 6 flushes of a Rails app under wrk were left
// uncalibrated ("a GC ran during the flush's walk"); between census slices
// a GC would also free what the census counted, and pages with it. The
// cost: what the other threads allocate during the census and the walk
// (a few ms per 100k records, plus ~1 ms per 100k live objects of census)
// waits for the next GC. An explicit GC.start still runs (Ruby ignores
// GC.disable for it) and still leaves that flush uncalibrated unless it
// was flush(gc: true). A GC already disabled by the app stays disabled.
void TakeCensusBeforeWalk(FlushState* f) {
  HeapCollector* c = f->c;
  f->census_off = CensusOffReason(c->census, c->exact, c->running);
  if (f->census_off) return;
  TurnGcOffForCensus(f);
  int64_t t0 = MonotonicNs();
  f->census_started_ns = t0;
  f->census_gc_count = rb_gc_count();
  BeginCensus(&c->census, &f->census);
  f->census_begin_ns = MonotonicNs() - t0;
  for (;;) {
    EndBurst(c);  // records sampled while we yielded get their final weights
    CommitPending(c);  // and their commit time, before this slice's stamp
    // Past the wall-time bound (kCensusMaxWallNs: other threads kept the
    // GVL long after our yields) the rest is one slice: GC stays off no
    // longer, and the census still calibrates. The pause is then the rest
    // of the walk, where the threads that stretched the census already
    // hold the GVL for whole time slices (100 ms) themselves.
    if (!f->census_rushed && MonotonicNs() - t0 > c->census.max_wall_ns) f->census_rushed = true;
    // A slice's budget is what is left of the hold's: the GVL has been
    // held since the last yield (or the flush's start), and listing the
    // pages (BeginCensus: ~5 ms at 5M objects on 3.1, Ruby finishing a lazy
    // sweep first) already took more than a slice's worth; then the slice
    // walks one page and yields.
    int64_t now = MonotonicNs();
    int64_t budget = rb_thread_alone() || f->census_rushed
                         ? 0
                         : std::max<int64_t>(1, c->census.slice_ns - (now - f->hold_started_ns));
    if (CensusSlice(c->census, &f->census, now, budget)) break;
    // Another thread waits for the GVL (or will soon): let it run.
    EndHold(f);
    rb_thread_schedule();  // may run interrupts, and raise: we are under Protect
    f->yields++;
    f->hold_started_ns = MonotonicNs();
  }
  if (!EndCensus(&c->census, &f->census)) f->census_off = "GC.compact moved objects";
  // An explicit GC.start between slices (GC.disable does not stop it) freed
  // what earlier slices counted, maybe whole pages.
  if (!f->census_off && rb_gc_count() != f->census_gc_count) f->census_off = "a GC ran during the census";
  if (!f->census_off) {
    f->strata = std::move(f->census.strata);
    f->class_names = CensusClassNames(f->strata);
  }
  f->census_ns = MonotonicNs() - t0;
}

// Calibrates the walked records' inuse_* to the census: every stratified
// record's values are scaled by its stratum's census/estimate. If a GC ran
// during the walk, objects the census counted may have been found dead
// (or moved, if it compacted): the plain estimate then (factors of 1).
//
// A GC that ran during the walk is harmless after flush(gc: true): the
// census, taken right after a full GC, counted only reachable objects, so
// the walk's GC can only have freed what became garbage since (the flush's
// own objects, and what other threads dropped while it yielded). Without
// that GC the census counted every object that died since the last GC,
// alive to it as to the lookups until a GC: if one ran during the walk,
// the samples checked after it no longer match the census.
void CalibrateToCensus(FlushState* f) {
  if (!f->census_off && ObjectsMoved(f->c->census)) f->census_off = "GC.compact moved objects";
  if (!f->census_off && !f->gc && rb_gc_count() != f->census_gc_count) f->census_off = "a GC ran during the flush's walk";
  if (f->census_off) {
    f->strata = LiveStrata();  // no calibration: every factor 1
  } else {
    f->aggregator->CollectSampled(&f->strata);
  }
  f->aggregator->ApplyStrata(f->strata);
}

std::string CensusComment(const FlushState& f) {
  if (f.c->exact) return "";
  if (f.census_off) return std::string("Live bytes: sampled estimate, not calibrated to a heap census (") + f.census_off + ")";
  LiveStrata::Totals all = f.strata.Census(), unsampled = f.strata.Unsampled();
  auto count = [](uint64_t n, const char* one, const char* many) { return std::to_string(n) + " " + (n == 1 ? one : many); };
  std::string line = "Live bytes: calibrated to a heap census of " + count(all.objects, "object", "objects") + " (" +
                     std::to_string(all.bytes) + " bytes) allocated since the profiler started (inuse_* cover all of that time; Duration is alloc_*'s window), in " +
                     count(all.strata, "class/type/size class", "class/type/size classes");
  if (unsampled.strata == 0) return line + "; every one has a sample";
  return line + "; " + std::to_string(unsampled.bytes) + " bytes (" + count(unsampled.objects, "object", "objects") +
         ") in " + count(unsampled.strata, "class", "classes") + " no sample reached are in \"[not sampled]\" rows";
}

void SymbolizeFrames(FlushState* f) {
  StackTable& stacks = f->c->store.stacks();
  // First collect (pure C++): the Ruby calls below may switch threads, and
  // other threads' hooks may then grow the stack table under any reference
  // we held into it. Frames referenced by retained stacks cannot die.
  std::vector<uint32_t>& todo = f->frames_to_symbolize;
  size_t rows = 0;
  for (const auto& row : f->aggregator->rows()) {
    for (uint32_t frame : stacks.frames(row.first.stack_id))
      if (!stacks.symbol(frame).resolved) todo.push_back(frame);
    // Only flush code touches the aggregator, so iterating on after a yield is safe.
    if ((++rows & 1023) == 0) MaybeYield(f);
  }
  for (size_t n = 0; n < todo.size(); n++) {
    uint32_t frame = todo[n];
    if (stacks.symbol(frame).resolved) continue;  // duplicates in todo
    stacks.SetSymbol(frame, SymbolizeFrame(static_cast<VALUE>(stacks.frame_handle(frame))));
    if ((n & 63) == 63) MaybeYield(f);
  }
}

VALUE StatsHash(const FlushState& f, VALUE bytes) {
  VALUE h = rb_hash_new();
  auto set = [&](const char* key, long long v) { rb_hash_aset(h, ID2SYM(rb_intern(key)), LL2NUM(v)); };
  set("samples", static_cast<long long>(f.records + f.drained));
  set("live_samples", static_cast<long long>(f.live));
  set("freed_samples", static_cast<long long>(f.freed + f.drained));
  set("flush_ns", MonotonicNs() - f.started_ns);
  set("walk_ns", f.walk_ns);
  set("symbolize_ns", f.symbolize_ns);
  set("encode_ns", f.encode_ns);
  set("max_gvl_hold_ns", f.max_hold_ns);
  set("gvl_yields", static_cast<long long>(f.yields));
  set("bytes", RSTRING_LEN(bytes));
  rb_hash_aset(h, ID2SYM(rb_intern("liveness")), rb_str_new_cstr(LivenessName(*f.c)));
  if (!f.c->exact) {
    // census: "on", or why not; the rest only when it ran.
    rb_hash_aset(h, ID2SYM(rb_intern("census")), rb_str_new_cstr(f.census_off ? f.census_off : "on"));
    if (!f.census_off) {
      LiveStrata::Totals all = f.strata.Census(), unsampled = f.strata.Unsampled();
      set("census_ns", f.census_ns);
      set("census_slices", static_cast<long long>(f.census.slices));
      set("census_pages", static_cast<long long>(f.census.pages.pages()));
      set("census_max_slice_ns", f.census.max_slice_ns);
      set("census_rushed", f.census_rushed ? 1LL : 0LL);
      set("census_begin_ns", f.census_begin_ns);
      set("census_objects", static_cast<long long>(all.objects));
      set("census_bytes", static_cast<long long>(all.bytes));
      set("census_strata", static_cast<long long>(all.strata));
      set("census_calibrated_strata", static_cast<long long>(f.strata.calibrated_strata()));
      set("census_unsampled_bytes", static_cast<long long>(unsampled.bytes));
      set("census_unsampled_objects", static_cast<long long>(unsampled.objects));
      set("stratified_samples", static_cast<long long>(f.stratified));
      set("dead_by_census", static_cast<long long>(f.dead_by_census));
      set("census_start_slots_ns", f.c->census.start_ns);
      set("census_refreshes", static_cast<long long>(f.c->census.refreshes));
      set("census_refresh_ns", f.c->census.refresh_ns);
    }
  }
  return h;
}

void DescribeWindow(HeapCollector* c, HeapProfileRows* rows) {
  rows->time_nanos = c->window.start_realtime_ns;
  rows->start_monotonic_ns = c->window.start_mono_ns;
  rows->pid = static_cast<int64_t>(getpid());
  rows->label_sets = &LabelSets::Global();
  rows->duration_nanos = RealtimeNs() - c->window.start_realtime_ns;
  rows->sample_period = c->exact ? 1 : static_cast<int64_t>(c->interval_ns);
  rows->period_type = c->exact ? ValueType{"allocations", "count"} : ValueType{"sample_interval", "nanoseconds"};
  rows->comment = c->exact ? "fathom heap profile, exact mode (every allocation)"
                           : "fathom heap profile, sampled mode (interval " + std::to_string(c->interval_ns) + "ns)";
  if (!c->exact) rows->sampling_comment = TickComment(WindowTicks(*c));
}

// Runs under Protect: only FlushState holds C++ state across Ruby calls.
// CommitPending leaves the objects it looked at in dead stack slots below
// this frame. The GC scans the machine stack conservatively from deep in
// its own frames, which do not overwrite every slot first: a sampled object
// that just died would survive the GC the caller asked for, and with a
// sample's weight (hundreds of allocations) show up as live. Zeroing the
// area first makes flush(gc: true) mean what it says.
__attribute__((noinline)) void ClearDeadStack() {
  volatile char area[16 * 1024];
  for (size_t i = 0; i < sizeof area; i++) area[i] = 0;
}

void FlushBody(FlushState* f) {
  HeapCollector* c = f->c;
  f->started_ns = MonotonicNs();
  f->hold_started_ns = f->started_ns;
  // A GC can leave millions of freed records to fold: do it in batches,
  // yielding between them, before CommitPending would do it in one go.
  while (c->store.has_freed()) {
    c->window.drained_freed += c->store.DrainFreed(4096);
    MaybeYield(f);
  }
  EndBurst(c);  // its weights must be final before its records are reported
  CommitPending(c);
  if (f->gc) {
    ClearDeadStack();
    rb_gc_start();
  }

  BusyScope busy(c);  // a longjmp past it is repaired by FlushScope
  f->aggregator = std::make_unique<HeapAggregator>(c->store.stacks());
  int64_t t0 = MonotonicNs();
  c->window.drained_freed += c->store.DrainFreed();
  f->drained = c->window.drained_freed;
  c->window.drained_freed = 0;
  f->aggregator->AddFreedTotals(c->store.TakeFreedTotals());
  TakeCensusBeforeWalk(f);
  WalkRecords(f);
  CalibrateToCensus(f);
  TurnGcBackOn(f);
  // Taken every flush (a pprof flush has no use for them) so none outlive
  // the stacks their keys name.
  std::vector<AllocEvent> events = c->store.TakeAllocEvents();
  int64_t t1 = MonotonicNs();
  SymbolizeFrames(f);
  f->rows_builder = std::make_unique<HeapProfileRowsBuilder>(c->store, *f->aggregator);
  while (!f->rows_builder->Step(2048)) MaybeYield(f);
  if (f->parts) f->rows_builder->AddAllocEvents(events);
  std::vector<AllocEvent>().swap(events);
  f->rows = f->rows_builder->Take();
  if (!f->census_off) {
    AddUnsampledStrataRows(
        f->strata, [f](const Stratum& s) { return f->class_names.at(s.klass); }, &f->rows);
  }
  f->aggregator->ReleaseStacks();
  int64_t t2 = MonotonicNs();
  f->walk_ns = t1 - t0;
  f->symbolize_ns = t2 - t1;
  DescribeWindow(c, &f->rows);
  f->rows.census_comment = CensusComment(*f);
  ResetWindow(c);

  // Drain after stop in exact mode: every record has now been reported with
  // the liveness FREEOBJ gave it; nothing watches them any more.
  if (c->exact && !c->running && g_freeobj_owner == c) {
    ReleaseFreeobjOwnership();
    c->store.Clear();
  }

  EndHold(f);
  int64_t t3 = MonotonicNs();
  if (f->parts) {
    f->hold_started_ns = MonotonicNs();
    f->parts->heap = std::make_unique<HeapProfileRows>(std::move(f->rows));
    c->window.flushes++;
    VALUE none = rb_str_new(nullptr, 0);
    EndHold(f);
    f->result = rb_ary_new_from_args(2, none, StatsHash(*f, none));
    return;
  }
  f->rows.stamp = std::move(f->stamp);
  WithoutGvl([f] {
    FATHOM_FAULT_POINT("heap_flush_encode");
    f->bytes = EncodeHeapProfile(f->rows);
  });
  f->hold_started_ns = MonotonicNs();
  f->encode_ns = f->hold_started_ns - t3;
  c->window.flushes++;
  VALUE bytes = rb_str_new(f->bytes.data(), static_cast<long>(f->bytes.size()));
  EndHold(f);
  f->result = rb_ary_new_from_args(2, bytes, StatsHash(*f, bytes));
}

// Puts the collector's flags back however the flush ends. A longjmp out of
// FlushBody (a Thread#raise while it yields) skips BusyScope's destructor
// and can leave CommitPending's flag set.
class FlushScope {
 public:
  explicit FlushScope(HeapCollector* c) : c_(c) { c_->flushing = true; }
  ~FlushScope() {
    c_->flushing = false;
    c_->census.census_in_progress = false;  // refreshes may run again (live_census.h)
    if (!completed_) c_->commit.committing = false;  // in case it unwound through CommitPending
    if (c_->busy_depth > 0) {
      c_->busy_depth = 0;
      c_->busy_thread = Qnil;
    }
  }
  void Complete() { completed_ = true; }
  FlushScope(const FlushScope&) = delete;
  FlushScope& operator=(const FlushScope&) = delete;

 private:
  HeapCollector* c_;
  bool completed_ = false;
};

}  // namespace

namespace {
TickCounts TimerCountsNow() {
  HeapTick::Stats t = HeapTick::stats();
  return TickCounts{t.ticks, t.armed_skips, t.idle_ticks, 0};
}
}  // namespace

void ResetWindow(HeapCollector* c) {
  c->window.start_realtime_ns = RealtimeNs();
  c->window.start_mono_ns = MonotonicNs();
  c->window.ticks_at_start = TimerCountsNow();
  c->window.bursts = 0;
}

TickCounts WindowTicks(const HeapCollector& c) {
  TickCounts now = TimerCountsNow(), at = c.window.ticks_at_start;
  auto since = [](uint64_t a, uint64_t b) { return a > b ? a - b : 0; };
  return TickCounts{since(now.ticks, at.ticks), since(now.armed_skips, at.armed_skips), since(now.idle, at.idle),
                    c.window.bursts};
}

VALUE FlushHeapProfile(HeapCollector* c, bool gc, FirefoxParts* parts, OutputStamp stamp) {
  if (c->max_depth == 0) ThrowFathomError("fathom: collector was not initialized");
  if (c->flushing) ThrowFathomError("fathom: a flush of this profiler is already in progress");
  auto f = std::make_unique<FlushState>();
  f->c = c;
  f->gc = gc;
  f->parts = parts;
  f->stamp = std::move(stamp);
  FlushScope scope(c);
  FlushState* state = f.get();
  // An exception out of the walk (an interrupt raised while it yielded)
  // must not leave GC disabled.
  struct GcEnabler {
    FlushState* f;
    ~GcEnabler() {
      TurnGcBackOn(f);
    }
  } enabler{state};
  Protect([state] { FlushBody(state); });
  scope.Complete();
  return state->result;
}

void InitHeapFlush() { ResetInForkedChild(TurnGcBackOnInChild); }

}  // namespace fathom
