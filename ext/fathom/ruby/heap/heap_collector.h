// Fathom::Native::HeapCollector: allocation sampling and live-heap tracking
// for the heap profile (mode :heap). The files that each own one mechanism
// share the collector's common state; each keeps its own in a part of it
// (collector_parts.h):
//
//   allocation_hooks.cc        NEWOBJ/FREEOBJ hooks and their arming
//   sample_commit.cc           commit of pending records: class/thread
//                              labels (cached per GC epoch), memsize
//   heap_flush.cc              flush: walk, symbolize, copy, encode off the GVL
//   heap_collector.cc          the Ruby class, GC mark/compact glue, fork
//   live_objects.cc            the live objects and their sites, for
//                              Fathom::Retention.explain_sites
//
// Life of a sample (details and the Ruby versions each path applies to are in
// docs/internals/ruby-binding.md, "Following one allocation"):
//
//  1. Arming. Sampled mode: the HeapTick gets ArmJob run at a safe point
//     on the GVL holder every interval; ArmJob installs the NEWOBJ hook.
//     Exact mode: the NEWOBJ and FREEOBJ hooks are installed for the whole run.
//  2. NewobjHook (inside Ruby's allocator: must not allocate Ruby objects,
//     raise, or look inside the half-built object). Sampled mode skips a
//     random number of allocations, then takes a burst of candidates (each
//     after a short random skip) and removes itself.
//     It captures the stack with rb_profile_frames into preallocated
//     buffers, interns it (plain C++ memory), records the object, thread and
//     weight as a *pending* record and triggers the commit job.
//  3. CommitPending (postponed job: GVL held, allocation allowed, the object
//     is built by now). Pending objects are kept alive and pinned by our mark
//     function until this point. It measures the size (rb_obj_memsize_of),
//     thins sampled-mode candidates by bytes (heap_sampling/byte_thinning.h: most
//     small objects are dropped here, the kept ones weigh 1/p more),
//     names the class and thread, and SampleStore::Commit attaches the
//     liveness token: exact mode indexes the object for FreeobjHook; sampled
//     mode takes a token from LivenessTokens (object_id, or a key in an
//     ObjectSpace::WeakMap; liveness_tokens.h says which Ruby gets which).
//  4. Flush (GVL, yielded periodically): decides liveness (exact: FREEOBJ
//     seen or not; sampled: the token still leads to an object), measures
//     live sizes, SampleStore::Report aggregates per stack/class/thread,
//     symbolizes frames, then encodes and gzips without the GVL.
#pragma once

#include <ruby.h>

#include <cstdint>
#include <random>

#include "encode/output_stamp.h"
#include "heap/sample_store.h"
#include "heap_sampling/tick_accounting.h"
#include "ruby/heap/collector_parts.h"
#include "ruby/heap/live_census.h"
#include "ruby/heap/liveness_tokens.h"
#include "ruby/runtime/postponed_job.h"

namespace fathom {

// Exact mode commits pending records in batches of this many: one postponed
// job per allocation would double the per-allocation cost. Pending objects
// are pinned until committed, so this also bounds what we keep alive.
constexpr size_t kExactCommitBatch = 256;

struct HeapCollector {
  // Configuration (immutable after initialize).
  bool exact = false;
  uint64_t interval_ns = 0;
  int max_depth = 0;

  bool running = false;
  bool flushing = false;
  // Exact mode after stop: FREEOBJ was no longer watched for these records,
  // so they can no longer be called live.
  bool liveness_lost = false;
  SampleStore store;
  // Sampled mode: how a record's object is found again at flush.
  LivenessTokens tokens{TokenKind::kObjectId};
  // The random source of sampled mode's skips (the hooks) and of thinning
  // (the commit); seeded per process.
  std::minstd_rand rng;

  // The thread doing profiler work (commit, flush): its allocations are the
  // profiler's own and are not sampled.
  VALUE busy_thread = Qnil;
  int busy_depth = 0;

  // Each mechanism's own state (collector_parts.h).
  HookState hooks;        // allocation_hooks.cc
  CommitState commit;     // sample_commit.cc
  WindowState window;     // heap_flush.cc
  // Sampled mode: the slots noted at the window's start, for the flush's
  // heap census (live_census.h).
  CensusState census;
};

// The running collector. Hooks are process-global, so there is at most one;
// it is also registered as a GC root so it cannot be freed while hooked.
extern HeapCollector* g_active;
extern VALUE g_active_self;
// The exact-mode collector whose FREEOBJ hook is installed. It can outlive
// stop() until a flush drains its records (see CollectorStop).
extern HeapCollector* g_freeobj_owner;
extern VALUE g_freeobj_owner_self;

// Marks the current thread as doing profiler work (its allocations are not
// sampled) for the scope's lifetime. Reset by hand where a Ruby longjmp may
// skip the destructor (the flush).
class BusyScope {
 public:
  explicit BusyScope(HeapCollector* c) : c_(c) {
    if (c_->busy_depth++ == 0) c_->busy_thread = rb_thread_current();
  }
  ~BusyScope() {
    if (--c_->busy_depth == 0) c_->busy_thread = Qnil;
  }
  BusyScope(const BusyScope&) = delete;
  BusyScope& operator=(const BusyScope&) = delete;

 private:
  HeapCollector* c_;
};

// ---- allocation_hooks.cc
void AddNewobjHook();
void RemoveNewobjHook();
void AddFreeobjHook();
void RemoveFreeobjHook();
extern PostponedJob g_arm_job;  // the HeapTick's job: arms the NEWOBJ hook
void InitAllocationHooks();
// TotalAllocatedObjects() is declared in live_census.h.
// Candidates a timer tick takes in sampled mode (before thinning at commit).
extern const size_t kBurstCandidates;
// Ends the burst in progress, if any: spreads its weight, disarms the hook
// and has its records committed. Stop, flush and fork call it.
void EndBurst(HeapCollector* c);

// ---- sample_commit.cc
void InitSampleCommit();
// Turns pending records into live ones, and folds freed ones into totals.
void CommitPending(HeapCollector* c);
extern PostponedJob g_commit_job;
// MemsizeOf() is declared in live_census.h.

// How this collector tells live samples from dead ones, for stats:
// "freeobj_hook" (exact), "object_id" or "weakmap" (sampled); "lost" when
// an exact collector's FREEOBJ hook went before a flush reported its records
// (another exact collector started, or Ractor.new): nothing is counted live.
inline const char* LivenessName(const HeapCollector& c) {
  if (c.liveness_lost) return "lost";
  return c.exact ? "freeobj_hook" : LivenessTokens::KindName(c.tokens.kind());
}

// ---- heap_flush.cc
// flush(gc) -> [bytes, stats]; the body of HeapCollector#flush.
// With parts (flush_into): the rows and their sampled allocations go into
// parts->heap for a combined Firefox file, and bytes is "".
struct FirefoxParts;
VALUE FlushHeapProfile(HeapCollector* c, bool gc, FirefoxParts* parts = nullptr, OutputStamp stamp = {});
void ResetWindow(HeapCollector* c);
// The timer's ticks and the bursts since the window started.
TickCounts WindowTicks(const HeapCollector& c);
// Registers the flush's fork-child reset (GC turned off by a census in
// progress is turned back on in a forked child).
void InitHeapFlush();

// ---- heap_collector.cc
// Another collector's records keep only what FREEOBJ told them so far.
void ReleaseFreeobjOwnership();
// The collector behind a HeapCollector object (TypeError, a longjmp, for
// anything else: call it before any C++ object is alive in the method).
HeapCollector* UnwrapHeapCollector(VALUE self);

// ---- live_objects.cc
// live_objects and live_sites: the live sampled objects, for the
// retention snapshot that explains the top allocation sites.
void DefineLiveObjectMethods(VALUE klass);

}  // namespace fathom
