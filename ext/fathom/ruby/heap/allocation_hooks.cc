// The heap collector's allocation hooks: NEWOBJ takes a sample (the hook's
// half of a record: stack, object, thread, weight), FREEOBJ (exact mode)
// retires a record whose object died. Sampled mode arms NEWOBJ for a burst
// of candidates per timer tick (ArmJob), thinned later at commit. See heap_collector.h for the life of
// a sample.
#include <ruby.h>
#include <ruby/debug.h>

#include <type_traits>

#include "ruby/runtime/boundary.h"
#include "ruby/heap/heap_collector.h"
#include "ruby/runtime/ractor_guard.h"
#include "ruby/heap/heap_tick.h"
#include "ruby/labels/thread_labels.h"

namespace fathom {

HeapCollector* g_active = nullptr;
VALUE g_active_self = Qnil;
HeapCollector* g_freeobj_owner = nullptr;
VALUE g_freeobj_owner_self = Qnil;

namespace {

// After each tick, sampled mode lets a random 0..kMaxRandomSkip allocations
// pass before taking the first sample. A tick tends to land in the gap
// before an allocation burst, so taking the very first allocation after it
// favours allocations that follow slow code. Measured on examples/leaky_app.rb
// (in-use bytes, 6 runs each, exact mode = 100%): skip 0..16 read +25%,
// skip 0..128 read -4%. Costs on average 64 hook calls per tick.
constexpr uint32_t kMaxRandomSkip = 128;

// Then the tick takes kBurstCandidates candidates in all, each after a
// random 0..2*kBurstMeanSkip allocations, and disarms the hook. One sample
// per tick left the in-use profile resting on a handful of live samples
// (bench/accuracy.rb: 5-10 live samples a run, live shares off by 50 pp);
// a tick's fixed cost (the timer, the postponed job, arming the hook, the
// first skip) is most of the cost of a sample, so further samples in the
// same tick are cheap: each costs its skipped hook calls (~0.3us each) and
// one stack capture. The random skips keep the burst from locking onto a
// loop's period; see docs/internals/heap.md "Bursts" for the estimator.
//
// 64 candidates with skips of 0..2, not 16 with skips of 0..16: the rare big
// survivors are only found by looking at more allocations, and a candidate
// is looked at for about the price of the skips it replaces. What made 64
// *samples* too dear (the liveness token and check, paid per kept sample)
// is cut by thinning at commit (sample_commit.cc, heap_sampling/byte_thinning.h):
// about a quarter are kept, by bytes, so a tick keeps ~16 as before and
// every big object among the 64. Measured in docs/internals/heap.md "Thinning
// by bytes".
constexpr uint32_t kBurstMeanSkip = 1;

VALUE sym_total_allocated_objects = Qnil;

uint32_t BurstSkip(HeapCollector* c) { return static_cast<uint32_t>(c->rng() % (2 * kBurstMeanSkip + 1)); }

bool IsOwnAllocation(HeapCollector* c, VALUE thread) { return c->busy_depth > 0 && thread == c->busy_thread; }

// Captures up to max_depth + 1 frames into c->hooks.handles and c->hooks.lines. Where
// VALUE is uint64_t (64-bit Linux), Ruby writes the handles straight into
// the buffer the stack table reads: no copy per frame. (A template so that
// the branch not taken is not compiled where the types differ.)
template <typename Handle = uint64_t>
int CaptureFrames(HeapCollector* c) {
  if constexpr (std::is_same_v<VALUE, Handle>) {
    return rb_profile_frames(0, c->max_depth + 1, c->hooks.handles.data(), c->hooks.lines.data());
  } else {
    int depth = rb_profile_frames(0, c->max_depth + 1, c->hooks.frames.data(), c->hooks.lines.data());
    for (int i = 0; i < depth; i++) c->hooks.handles[i] = static_cast<Handle>(c->hooks.frames[i]);
    return depth;
  }
}

void TakeSample(HeapCollector* c, VALUE obj, VALUE thread) {
  uint64_t weight = 1;
  if (!c->exact) {
    // The sample stands for every allocation since the previous sample, so
    // the weights add up to the exact allocation count. rb_gc_stat with a
    // Symbol key reads a counter; it does not allocate.
    size_t total = rb_gc_stat(sym_total_allocated_objects);
    weight = total > c->hooks.last_total_allocated ? total - c->hooks.last_total_allocated : 1;
    c->hooks.last_total_allocated = total;
  }

  int depth = CaptureFrames(c);
  bool truncated = depth > c->max_depth;
  if (truncated) depth = c->max_depth;

  FATHOM_FAULT_POINT("newobj_hook");  // where interning and AddPending may run out of memory
  SampleRecord record;
  record.object = static_cast<uint64_t>(obj);
  record.thread = static_cast<uint64_t>(thread);
  record.weight = weight;
  // The allocating thread's request labels: one thread-local load, for a
  // sampled allocation only (unsampled ones returned above).
  record.label_set = CurrentThreadLabels().label_set;
  record.stack_id = c->store.stacks().Intern(c->hooks.handles.data(), c->hooks.lines.data(), static_cast<size_t>(depth), truncated);
  uint32_t index;
  try {
    index = c->store.AddPending(record);
  } catch (...) {
    c->store.stacks().Release(record.stack_id);
    throw;
  }
  c->hooks.samples_taken++;
  if (c->exact) {
    if (c->store.pending().size() >= kExactCommitBatch) g_commit_job.Trigger();
    return;
  }
  c->hooks.burst.push_back(index);  // capacity kBurstCandidates, reserved at start
  if (c->hooks.burst.size() >= kBurstCandidates) return EndBurst(c);
  c->hooks.skip_countdown = BurstSkip(c);
}

// RUBY_INTERNAL_EVENT_NEWOBJ. Runs inside the allocator.
void NewobjHook(VALUE, void* trace_arg) {
  NoThrow("newobj hook", [&] {
    VALUE thread = rb_thread_current();  // one TLS lookup, for the guard, IsOwnAllocation and the record
    if (!OnMainRactor(thread)) return NoteOtherRactor();
    HeapCollector* c = g_active;
    if (!c || IsOwnAllocation(c, thread)) return;
    if (!c->exact && c->hooks.skip_countdown > 0) {
      c->hooks.skip_countdown--;
      return;
    }
    TakeSample(c, rb_tracearg_object(static_cast<rb_trace_arg_t*>(trace_arg)), thread);
  });
}

// RUBY_INTERNAL_EVENT_FREEOBJ (exact mode only). Runs during GC sweep: only
// a tombstone write in the object map and a state change, no allocation.
// No Ractor guard: see ractor_guard.h.
void FreeobjHook(VALUE, void* trace_arg) {
  NoThrow("freeobj hook", [&] {
    HeapCollector* c = g_freeobj_owner;
    if (!c) return;
    c->store.ObjectFreed(static_cast<uint64_t>(rb_tracearg_object(static_cast<rb_trace_arg_t*>(trace_arg))));
  });
}

// Hooks added with RUBY_EVENT_HOOK_FLAG_RAW_ARG are called as
// func(data, rb_trace_arg_t*), though the API types them as
// rb_event_hook_func_t; the detour through void(*)() is the sanctioned way
// to say so to the compiler.
template <typename F>
rb_event_hook_func_t AsHookFunc(F* f) {
  return reinterpret_cast<rb_event_hook_func_t>(reinterpret_cast<void (*)()>(f));
}

constexpr rb_event_hook_flag_t kRawHookFlags =
    static_cast<rb_event_hook_flag_t>(RUBY_EVENT_HOOK_FLAG_SAFE | RUBY_EVENT_HOOK_FLAG_RAW_ARG);

// Sampled mode: the HeapTick's job. Runs at a safe point with the GVL.
void ArmJob(void*) {
  NoThrow("arm job", [] {
    HeapTick::JobRan();
    HeapCollector* c = g_active;
    if (!c || c->exact || !c->running || HeapTick::hook_armed.load()) return;
    if (OtherRactorSeen()) return;  // sampling stops: see ractor_guard.h
    MaybeRefreshStartSlots(&c->census);  // a walk after the first GCs (live_census.h), before arming
    c->hooks.skip_countdown = static_cast<uint32_t>(c->rng() % (kMaxRandomSkip + 1));
    c->hooks.bursts++;
    c->window.bursts++;
    HeapTick::hook_armed.store(true);
    AddNewobjHook();
  });
}

}  // namespace

PostponedJob g_arm_job(ArmJob);
const size_t kBurstCandidates = 64;

void EndBurst(HeapCollector* c) {
  if (c->exact) return;
  RemoveNewobjHook();
  HeapTick::hook_armed.store(false);
  HeapTick::NoteRunner();  // this thread allocates: it is running Ruby code
  if (c->hooks.burst.empty()) return;
  c->store.SpreadWeight(c->hooks.burst.data(), c->hooks.burst.size());
  c->hooks.burst.clear();
  g_commit_job.Trigger();
}

void AddNewobjHook() { rb_add_event_hook2(AsHookFunc(NewobjHook), RUBY_INTERNAL_EVENT_NEWOBJ, Qnil, kRawHookFlags); }
void RemoveNewobjHook() { rb_remove_event_hook(AsHookFunc(NewobjHook)); }
void AddFreeobjHook() { rb_add_event_hook2(AsHookFunc(FreeobjHook), RUBY_INTERNAL_EVENT_FREEOBJ, Qnil, kRawHookFlags); }
void RemoveFreeobjHook() { rb_remove_event_hook(AsHookFunc(FreeobjHook)); }

void InitAllocationHooks() {
  sym_total_allocated_objects = ID2SYM(rb_intern("total_allocated_objects"));
  // Builds Ruby's stat-key table now, not in a hook. TryProtect: a GC
  // without the key must not fail the load (gc_collector.cc, InitGcCollector).
  TryProtect([] { rb_gc_stat(sym_total_allocated_objects); });
  g_arm_job.Preregister();
}

size_t TotalAllocatedObjects() { return rb_gc_stat(sym_total_allocated_objects); }

}  // namespace fathom
