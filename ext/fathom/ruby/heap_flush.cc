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
#include <vector>

#include "base/clock.h"
#include "boundary.h"
#include "frame_symbolizer.h"
#include "heap/heap_profile.h"
#include "firefox_parts.h"
#include "heap_collector.h"

#include <unistd.h>

namespace fathom {
namespace {

// The flush yields the GVL after holding it this long.
constexpr int64_t kMaxGvlHoldNs = 2000000;  // 2 ms

struct FlushState {
  Collector* c = nullptr;
  bool gc = false;
  FirefoxParts* parts = nullptr;  // flush_into: rows go here, not encoded
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
};

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

void WalkRecords(FlushState* f) {
  FATHOM_FAULT_POINT("heap_flush_walk");
  Collector* c = f->c;
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
    if (!c->liveness_lost) {
      if (c->exact) {
        alive = true;
        inuse_size = MemsizeOf(static_cast<VALUE>(store.at(i).object));
      } else {
        VALUE obj = c->tokens.Lookup(store.at(i).liveness_token);
        if (obj != Qundef) {
          alive = true;
          inuse_size = MemsizeOf(obj);
        }
      }
    }
    store.Report(i, alive, inuse_size, f->aggregator.get());
    if (alive) {
      f->live++;
    } else {
      f->freed++;
    }
  }
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
  return h;
}

void DescribeWindow(Collector* c, HeapProfileRows* rows) {
  rows->time_nanos = c->window_start_realtime_ns;
  rows->start_monotonic_ns = c->window_start_mono_ns;
  rows->pid = static_cast<int64_t>(getpid());
  rows->duration_nanos = RealtimeNs() - c->window_start_realtime_ns;
  rows->sample_period = c->exact ? 1 : static_cast<int64_t>(c->interval_ns);
  rows->period_type = c->exact ? ValueType{"allocations", "count"} : ValueType{"sample_interval", "nanoseconds"};
  rows->comment = c->exact ? "fathom heap profile, exact mode (every allocation)"
                           : "fathom heap profile, sampled mode (interval " + std::to_string(c->interval_ns) + "ns)";
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
  Collector* c = f->c;
  f->started_ns = MonotonicNs();
  f->hold_started_ns = f->started_ns;
  // A GC can leave millions of freed records to fold: do it in batches,
  // yielding between them, before CommitPending would do it in one go.
  while (c->store.has_freed()) {
    c->drained_since_flush += c->store.DrainFreed(4096);
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
  c->drained_since_flush += c->store.DrainFreed();
  f->drained = c->drained_since_flush;
  c->drained_since_flush = 0;
  f->aggregator->AddFreedTotals(c->store.TakeFreedTotals());
  WalkRecords(f);
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
  f->aggregator->ReleaseStacks();
  int64_t t2 = MonotonicNs();
  f->walk_ns = t1 - t0;
  f->symbolize_ns = t2 - t1;
  DescribeWindow(c, &f->rows);
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
    c->flushes++;
    VALUE none = rb_str_new(nullptr, 0);
    EndHold(f);
    f->result = rb_ary_new_from_args(2, none, StatsHash(*f, none));
    return;
  }
  WithoutGvl([f] {
    FATHOM_FAULT_POINT("heap_flush_encode");
    f->bytes = EncodeHeapProfile(f->rows);
  });
  f->hold_started_ns = MonotonicNs();
  f->encode_ns = f->hold_started_ns - t3;
  c->flushes++;
  VALUE bytes = rb_str_new(f->bytes.data(), static_cast<long>(f->bytes.size()));
  EndHold(f);
  f->result = rb_ary_new_from_args(2, bytes, StatsHash(*f, bytes));
}

// Puts the collector's flags back however the flush ends. A longjmp out of
// FlushBody (a Thread#raise while it yields) skips BusyScope's destructor
// and can leave CommitPending's flag set.
class FlushScope {
 public:
  explicit FlushScope(Collector* c) : c_(c) { c_->flushing = true; }
  ~FlushScope() {
    c_->flushing = false;
    if (!completed_) c_->committing = false;  // in case it unwound through CommitPending
    if (c_->busy_depth > 0) {
      c_->busy_depth = 0;
      c_->busy_thread = Qnil;
    }
  }
  void Complete() { completed_ = true; }
  FlushScope(const FlushScope&) = delete;
  FlushScope& operator=(const FlushScope&) = delete;

 private:
  Collector* c_;
  bool completed_ = false;
};

}  // namespace

void ResetWindow(Collector* c) {
  c->window_start_realtime_ns = RealtimeNs();
  c->window_start_mono_ns = MonotonicNs();
}

VALUE FlushHeapProfile(Collector* c, bool gc, FirefoxParts* parts) {
  if (c->max_depth == 0) ThrowFathomError("fathom: collector was not initialized");
  if (c->flushing) ThrowFathomError("fathom: a flush of this profiler is already in progress");
  auto f = std::make_unique<FlushState>();
  f->c = c;
  f->gc = gc;
  f->parts = parts;
  FlushScope scope(c);
  FlushState* state = f.get();
  Protect([state] { FlushBody(state); });
  scope.Complete();
  return state->result;
}

}  // namespace fathom
