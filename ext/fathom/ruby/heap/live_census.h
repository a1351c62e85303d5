// The heap census that calibrates sampled mode's live bytes
// (core/heap_census/live_strata.h, docs/internals/heap.md "Calibrating live bytes to a
// heap census").
//
// At a window's start the census notes which heap slots hold an object
// (SlotOccupancy); at flush it walks the heap again and counts, per class,
// type and size class, the live objects in slots that were free at the start:
// objects certainly allocated in the window. Both walks use Ruby's own
// heap iteration (rb_objspace_each_objects, what ObjectSpace.each_object
// uses), with the GVL, outside GC, allocating no Ruby object.
//
// The census is only valid when the sampler saw every allocation of the
// window with its usual probability and no object moved; otherwise the
// flush keeps the plain estimate and says why (OffReason).
#pragma once

#include <ruby.h>

#include <cstdint>
#include <string>
#include <unordered_map>

#include "heap_census/census_pages.h"
#include "heap_census/live_strata.h"
#include "heap_census/slot_occupancy.h"

namespace fathom {

// Defined with the hooks and the commit, used by the census and the
// collector alike:
// GC.stat(:total_allocated_objects), without allocating (allocation_hooks.cc).
size_t TotalAllocatedObjects();
// Bytes an object occupies (rb_obj_memsize_of where safe, else one slot;
// sample_commit.cc).
size_t MemsizeOf(VALUE obj);

// The census's state, a member of HeapCollector (heap_collector.h). The
// functions below take it rather than the collector, so that this file
// needs nothing from heap_collector.h, which includes it.

// A census slice's default budget: with the yields between slices and the
// rest of the flush's 2 ms holds, a 1 ms ticker sees gaps of a few ms.
constexpr int64_t kCensusSliceNs = 2000000;
// How long a flush's census may take in wall time, yields included, before
// it walks the rest in one slice. Between slices the flush gives the GVL
// to a waiting thread, which may keep it for Ruby's whole time slice
// (100 ms) before the next slice runs: a busy app could stretch a census of
// N slices to N x 100 ms, with GC off all along (heap_flush.cc,
// TakeCensusBeforeWalk). 250 ms bounds that, and what the app allocates
// with GC off meanwhile; a census that only yields to short wake-ups
// (tickers, I/O threads) ends long before it.
constexpr int64_t kCensusMaxWallNs = 250000000;

struct CensusState {
  bool enabled = true;  // HeapProfiler.new(census: false) turns it off
  SlotOccupancy start_slots;
  bool valid = false;
  const char* invalid_reason = "not started";
  size_t compact_count = 0;          // GC.stat(:compact_count) when the slots were noted
  size_t allocated_at_start = 0;     // total_allocated_objects then
  size_t allocated_at_stop = 0;      // and at the last stop (0 while running)
  int64_t start_ns = 0;              // how long noting the slots took
  // Refreshes (MaybeRefreshStartSlots): the GC count and time of the last
  // one, how long it took, the next GC of the exponential schedule.
  size_t start_gc_count = 0;
  size_t next_refresh_gc = 0;
  size_t last_refresh_gc = 0;
  int64_t last_refresh_ns = 0, last_refresh_duration_ns = 1;
  uint32_t refreshes = 0;
  int64_t refresh_ns = 0;
  // A flush's census, or the record walk after it, is in progress (both
  // yield the GVL, and other threads then run their arm jobs): no refresh
  // may change the start map under them. The census classifies objects by
  // the start map, and the walk classifies the sampled records by it
  // (LiveStratum): a refresh in between would make an object the census
  // left out as ambiguous (its slot held an object at the start) count as
  // certainly new in the walk, and the stratum's ratio census / estimate
  // would be biased low. Set by BeginCensus; cleared when the flush ends
  // (heap_flush.cc, FlushScope).
  bool census_in_progress = false;
  // The longest a census slice holds the GVL before the flush yields it
  // (0: no limit); the collector's census_slice_ns= sets it (tests).
  int64_t slice_ns = kCensusSliceNs;
  // The census's wall-time bound (kCensusMaxWallNs), after which the
  // rest is one slice; census_max_wall_ns= sets it (tests).
  int64_t max_wall_ns = kCensusMaxWallNs;
};


// A new window starts (start with no records left, a fork's child): note
// the occupied slots. Sampled mode only.
void NoteStartSlots(CensusState* s);
// At a safe point of a running sampled collector (the arm job, every tick):
// after the 1st, 2nd, 4th, 8th... GC since the start, and after any GC once
// the walks have taken under 0.5% of the time since the last one, walk the
// slots again and clear those now free from the start map. The objects that held them
// at the start have died, so what is allocated there later is certainly
// new. Without it every slot some garbage held at the start stays
// ambiguous for the whole window, however often it is reused (6% of the
// objects of an allocation loop on 3.3; most of a busy app's churn when
// the profiler starts mid-flight). Flags only, ~1 ms per 100k slots: at
// most ~0.5% of the time, and a slot freed by a GC is known free soon after.
void MaybeRefreshStartSlots(CensusState* s);
// The window goes on with a gap the sampler did not see (start after stop
// with records left): no census for it.
void InvalidateCensus(CensusState* s, const char* reason);
// Called by stop: allocations after it are not sampled.
void NoteCensusStop(CensusState* s);

// Why the census cannot calibrate this flush, or nullptr if it can.
const char* CensusOffReason(const CensusState& s, bool exact, bool running);
// The stratum of a live sampled object (its class, type, size class), or
// none when its slot was occupied at the start (it may be older than the
// window).
Stratum LiveStratum(const CensusState& s, VALUE obj, uint64_t size);
// Does the slot at `address`, which the census saw occupied, hold an
// object a sample can be of (not free, not internal)? Only with no GC
// since the census: a GC may free the slot, or its whole page.
bool SlotHoldsSampleableObject(uint64_t address);
// Did Ruby compact (move objects) since the start slots were noted?
bool ObjectsMoved(const CensusState& s);
// A census taken in slices (docs/internals/heap.md, "A census in slices"):
// it counts the live objects certainly allocated in the window into
// strata, and notes every slot that holds an object when its page is
// walked (occupied_now): a sampled object committed before its page was
// walked whose slot was then free is dead, which the flush then knows
// without a liveness lookup (on Ruby < 3.2.3 a failed object_id lookup
// raises, three objects and ~3 us each). `pages` says which page was
// walked when.
struct CensusProgress {
  LiveStrata strata;
  SlotOccupancy occupied_now;
  CensusPages pages;
  bool complete = false;
  uint32_t slices = 0;
  int64_t max_slice_ns = 0;
};
void BeginCensus(CensusState* s, CensusProgress* p);
// BeginCensus lists the heap's pages: the census walks those only.
// One slice: walks the pages not walked yet, stamping them `stamp_ns`,
// until budget_ns (0: no limit) has passed. Returns true when the census
// is complete: this slice walked every page left.
bool CensusSlice(const CensusState& s, CensusProgress* p, int64_t stamp_ns, int64_t budget_ns);
// After the last slice: sorts the maps for lookups. Returns false
// (strata and occupied_now emptied) if objects moved since the start.
bool EndCensus(CensusState* s, CensusProgress* p);

// The names of the census's classes (runtime/symbols.h: allocates nothing),
// for "[not sampled]" rows. Right after the census: an anonymous class
// whose instances it counted may be freed by a GC during the walk.
std::unordered_map<uint64_t, std::string> CensusClassNames(const LiveStrata& strata);

}  // namespace fathom
