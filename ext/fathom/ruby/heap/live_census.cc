// See live_census.h.
#include "ruby/heap/live_census.h"

#include <algorithm>

#include "base/clock.h"
#include "ruby/runtime/symbols.h"
#include "ruby/runtime/ractor_guard.h"
#include "ruby/runtime/ruby_private_api.h"

namespace fathom {
namespace {

VALUE sym_compact_count = Qnil;

// Refreshes of the start map take at most 1/kRefreshBudget of the time (0.5%)
// (beyond the exponential schedule after the first GCs).
constexpr int64_t kRefreshBudget = 200;

// Allocations between stop and flush that never turn the census off.
constexpr size_t kFewAllocationsAfterStop = 1000;

size_t CompactCount() {
  if (NIL_P(sym_compact_count)) sym_compact_count = ID2SYM(rb_intern("compact_count"));
  return rb_gc_stat(sym_compact_count);
}

uint64_t Address(VALUE v) { return static_cast<uint64_t>(v); }

// rb_obj_class: the object's class past singleton classes and included
// modules' iclasses (a singleton class per object would give each its own
// stratum). Reads klass pointers only.
Stratum StratumFor(VALUE obj, uint64_t size) {
  return StratumOf(static_cast<uint64_t>(rb_obj_class(obj)), RB_BUILTIN_TYPE(obj), size);
}

#ifdef FATHOM_HAVE_SLOT_WALK
// Per page: every slot with nonzero flags holds an object (live, or dead
// and not yet swept: each_objects finishes sweeping first, so only objects
// that died since the last GC), internal ones included. Marking too much
// only makes more slots ambiguous later.
int NoteOccupiedSlots(void* start, void* end, size_t stride, void* data) {
  auto* slots = static_cast<SlotOccupancy*>(data);
  auto begin = reinterpret_cast<uintptr_t>(start), stop = reinterpret_cast<uintptr_t>(end);
  size_t page = slots->AddPage(begin, stop, stride);
  for (uintptr_t v = begin; v < stop; v += stride)
    if (RBASIC(static_cast<VALUE>(v))->flags != 0) slots->MarkOccupied(page, v);
  return 0;
}

int ClearFreedSlots(void* start, void* end, size_t stride, void* data) {
  auto* slots = static_cast<SlotOccupancy*>(data);
  auto begin = reinterpret_cast<uintptr_t>(start), stop = reinterpret_cast<uintptr_t>(end);
  size_t page = slots->FindPage(begin, stop, stride);
  if (page == SlotOccupancy::kNoPage) return 0;  // a page added since the start: nothing to clear
  size_t slot = 0;
  for (uintptr_t v = begin; v < stop; v += stride, slot++)
    if (RBASIC(static_cast<VALUE>(v))->flags == 0) slots->MarkSlotFree(page, slot);
  return 0;
}

int ListPages(void* start, void*, size_t, void* data) {
  static_cast<CensusPages*>(data)->Expect(reinterpret_cast<uintptr_t>(start));
  return 0;
}

struct CensusWalk {
  const SlotOccupancy* start_slots;
  CensusProgress* progress;
  int64_t stamp;
  SliceBudget budget;
  bool stopped;     // the budget ran out: pages may be left
  bool walked_any;  // a page in this slice
};

// Only the pages of the census's start are walked; one walked in an
// earlier slice is skipped: Ruby's iteration cannot
// resume where a slice stopped (census_pages.h). On 3.2+ returning nonzero
// ends only the current size pool's pages, so once stopped every further
// page is skipped here too.
int CountNewObjects(void* start, void* end, size_t stride, void* data) {
  auto* walk = static_cast<CensusWalk*>(data);
  auto begin = reinterpret_cast<uintptr_t>(start), stop = reinterpret_cast<uintptr_t>(end);
  CensusProgress* p = walk->progress;
  if (walk->stopped) return 1;
  if (!p->pages.Expected(begin) || p->pages.Walked(begin)) return 0;
  // At least one page a slice, so every slice makes progress.
  if (walk->walked_any && walk->budget.Expired(MonotonicNs())) {
    walk->stopped = true;
    return 1;
  }
  walk->walked_any = true;
  p->pages.Add(begin, stop, walk->stamp);
  size_t page = p->occupied_now.AddPage(begin, stop, stride);
  // The same page at the start (one lookup per page, not per object), or
  // none: a page added since holds only new objects.
  size_t start_page = walk->start_slots->FindPage(begin, stop, stride);
  size_t slot = 0;
  for (uintptr_t v = begin; v < stop; v += stride, slot++) {
    VALUE obj = static_cast<VALUE>(v);
    if (RBASIC(obj)->flags == 0) continue;  // free
    p->occupied_now.MarkOccupied(page, v);
    if (rb_objspace_internal_object_p(obj)) continue;  // never shown (never sampled either)
    if (start_page != SlotOccupancy::kNoPage ? walk->start_slots->SlotWasOccupied(start_page, slot)
                                              : walk->start_slots->WasOccupied(v))
      continue;
    uint64_t size = MemsizeOf(obj);
    p->strata.AddCensus(StratumFor(obj, size), size);
  }
  return 0;
}
#endif

}  // namespace

std::unordered_map<uint64_t, std::string> CensusClassNames(const LiveStrata& strata) {
  std::unordered_map<uint64_t, std::string> names;
  for (uint64_t klass : strata.CensusClasses()) names.emplace(klass, ClassPathWithoutAllocating(static_cast<VALUE>(klass)));
  return names;
}

void NoteStartSlots(CensusState* census) {
  CensusState& s = *census;
  s.start_slots.Clear();
  s.allocated_at_stop = 0;
  if (!s.enabled) return;  // no walk; CensusOffReason says why
#ifdef FATHOM_HAVE_SLOT_WALK
  int64_t t0 = MonotonicNs();
  rb_objspace_each_objects(NoteOccupiedSlots, &s.start_slots);
  s.start_slots.Finish();
  s.start_ns = MonotonicNs() - t0;
  s.compact_count = CompactCount();
  s.allocated_at_start = TotalAllocatedObjects();
  s.start_gc_count = rb_gc_count();
  s.next_refresh_gc = s.start_gc_count + 1;
  s.last_refresh_gc = s.start_gc_count;
  s.last_refresh_ns = MonotonicNs();
  s.last_refresh_duration_ns = std::max<int64_t>(s.start_ns, 1);
  s.refreshes = 0;
  s.refresh_ns = 0;
  s.valid = true;
  s.invalid_reason = nullptr;
#else
  s.valid = false;
  s.invalid_reason = "this Ruby has no heap iteration";
#endif
}

void MaybeRefreshStartSlots(CensusState* census) {
#ifdef FATHOM_HAVE_SLOT_WALK
  CensusState& s = *census;
  if (!s.valid || s.census_in_progress || s.start_slots.occupied() == 0) return;
  size_t gcs = rb_gc_count();
  if (gcs == s.last_refresh_gc || ObjectsMoved(s)) return;  // nothing freed since the last look
  // The 1st, 2nd, 4th, 8th... GC, or whenever the walks have taken under
  // 1/kRefreshBudget of the time since the last one: a small heap is
  // looked at often, a big one (whose walk is long) rarely.
  int64_t now = MonotonicNs();
  if (gcs < s.next_refresh_gc && now - s.last_refresh_ns < kRefreshBudget * s.last_refresh_duration_ns) return;
  rb_objspace_each_objects(ClearFreedSlots, &s.start_slots);
  int64_t took = MonotonicNs() - now;
  s.refresh_ns += took;
  s.refreshes++;
  s.last_refresh_gc = gcs;
  s.last_refresh_ns = now;
  s.last_refresh_duration_ns = std::max<int64_t>(took, 1);
  s.next_refresh_gc = gcs + (size_t{1} << std::min<uint32_t>(s.refreshes, 30));
#else
  (void)census;
#endif
}

void InvalidateCensus(CensusState* s, const char* reason) {
  s->valid = false;
  s->invalid_reason = reason;
  s->start_slots.Clear();
}

void NoteCensusStop(CensusState* s) { s->allocated_at_stop = TotalAllocatedObjects(); }

const char* CensusOffReason(const CensusState& s, bool exact, bool running) {
  if (exact) return "exact mode";
  if (!s.enabled) return "census: false";
  if (!s.valid) return s.invalid_reason;
  if (OtherRactorSeen()) return "another Ractor allocated (not sampled)";
  if (ObjectsMoved(s)) return "GC.compact moved objects";
  if (!running && s.allocated_at_stop > 0) {
    // Objects allocated after stop are in the census but were never
    // candidates. A few (the flush call itself, a block form's epilogue)
    // cannot move a share; more than 1 in 1000 of the window's allocations
    // might.
    size_t after = TotalAllocatedObjects() - s.allocated_at_stop;
    size_t window = s.allocated_at_stop - s.allocated_at_start;
    if (after > std::max<size_t>(kFewAllocationsAfterStop, window / 1000)) return "allocations after stop were not sampled";
  }
  return nullptr;
}

bool SlotHoldsSampleableObject(uint64_t address) {
#ifdef FATHOM_HAVE_SLOT_WALK
  return !rb_objspace_internal_object_p(static_cast<VALUE>(address));
#else
  (void)address;
  return false;
#endif
}

bool ObjectsMoved(const CensusState& s) { return CompactCount() != s.compact_count; }

Stratum LiveStratum(const CensusState& s, VALUE obj, uint64_t size) {
  if (s.start_slots.WasOccupied(Address(obj))) return Stratum();
  return StratumFor(obj, size);
}

void BeginCensus(CensusState* s, CensusProgress* p) {
  p->strata = LiveStrata();
  p->occupied_now.Clear();
  p->pages.Clear();
  p->complete = false;
  p->slices = 0;
  p->max_slice_ns = 0;
  s->census_in_progress = true;
#ifdef FATHOM_HAVE_SLOT_WALK
  // The pages to walk: those of now (census_pages.h, Expect). Ruby
  // finishes any lazy sweep here.
  rb_objspace_each_objects(ListPages, &p->pages);
#endif
}

bool CensusSlice(const CensusState& s, CensusProgress* p, int64_t stamp_ns, int64_t budget_ns) {
#ifdef FATHOM_HAVE_SLOT_WALK
  int64_t t0 = MonotonicNs();
  CensusWalk walk{&s.start_slots, p, stamp_ns, SliceBudget(t0, budget_ns), false, false};
  rb_objspace_each_objects(CountNewObjects, &walk);
  p->slices++;
  p->max_slice_ns = std::max(p->max_slice_ns, MonotonicNs() - t0);
  p->complete = !walk.stopped;
  return p->complete;
#else
  (void)s;
  (void)stamp_ns;
  (void)budget_ns;
  p->complete = true;
  return true;
#endif
}

bool EndCensus(CensusState* s, CensusProgress* p) {
  // census_in_progress stays set until the flush ends: the walk uses the
  // same start map (live_census.h).
  p->occupied_now.Finish();
  p->pages.Finish();
#ifdef FATHOM_HAVE_SLOT_WALK
  if (p->complete && !ObjectsMoved(*s)) return true;
#else
  (void)s;
#endif
  p->strata = LiveStrata();
  p->occupied_now.Clear();
  p->pages.Clear();
  return false;
}

}  // namespace fathom
