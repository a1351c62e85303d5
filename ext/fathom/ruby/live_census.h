// The heap census that calibrates sampled mode's live bytes
// (core/heap/live_strata.h, IMPLEMENTATION.md "Calibrating live bytes to a
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

#include "heap/live_strata.h"
#include "heap/slot_occupancy.h"

namespace fathom {

struct Collector;

struct CensusState {
  bool enabled = true;  // HeapProfiler.new(census: false) turns it off
  SlotOccupancy start_slots;
  bool valid = false;
  const char* invalid_reason = "not started";
  size_t compact_count = 0;          // GC.stat(:compact_count) when the slots were noted
  size_t allocated_at_start = 0;     // total_allocated_objects then
  size_t allocated_at_stop = 0;      // and at the last stop (0 while running)
  int64_t start_ns = 0;              // how long noting the slots took
};

// A new window starts (start with no records left, a fork's child): note
// the occupied slots. Sampled mode only.
void NoteStartSlots(Collector* c);
// The window goes on with a gap the sampler did not see (start after stop
// with records left): no census for it.
void InvalidateCensus(Collector* c, const char* reason);
// Called by stop: allocations after it are not sampled.
void NoteCensusStop(Collector* c);

// Why the census cannot calibrate this flush, or nullptr if it can.
const char* CensusOffReason(const Collector* c);
// The stratum of a live sampled object (its class, type, size class), or
// none when its slot was occupied at the start (it may be older than the
// window).
Stratum LiveStratum(const Collector* c, VALUE obj, uint64_t size);
// Did Ruby compact (move objects) since the start slots were noted?
bool ObjectsMoved(const Collector* c);
// Counts the live objects certainly allocated in the window into strata,
// and notes every slot that holds an object now (occupied_now): a sampled
// object whose slot is free is dead, which the flush then knows without a
// liveness lookup (on Ruby < 3.2.3 a failed object_id lookup raises, three
// objects and ~3 us each). Returns false (strata and occupied_now
// untouched or empty) if objects moved since the start.
bool TakeCensus(const Collector* c, LiveStrata* strata, SlotOccupancy* occupied_now);

// A census stratum's class name, for its "[not sampled]" row. Calls Ruby
// (rb_class_path_cached, which does not allocate): with the GVL, after the
// census, while the class is alive (the census just saw its instances).
std::string StratumClassName(const Stratum& stratum);

}  // namespace fathom
