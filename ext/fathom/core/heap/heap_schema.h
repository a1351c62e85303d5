// The heap profile's values and their schema (encode/sample_schema.h): what
// a sampled allocation adds to its row (SampleStore::RecordValues), how
// rows add up (HeapAggregator) and the sample types the encoder writes, in
// the schema's order.
//
// The first four are Go's names, so `-sample_index=alloc_space` etc. work
// in pprof. The last two are unweighted: how many sample records stand
// behind the row's alloc_* and inuse_* estimates (in exact mode they equal
// the object counts). They let a reader tell an estimate resting on many
// samples from one resting on a single one (docs/internals/heap.md,
// "Showing the uncertainty"); they come last so that positional readers of
// the first four (-sample_index=0..3, older scripts) are unaffected.
//
// A new sample type: a field here, a line of kSchema, its value in
// SampleStore::RecordValues (heap/sample_store.cc), and its row in
// docs/formats.md.
#pragma once

#include <cstdint>

#include "encode/sample_schema.h"

namespace fathom {

struct HeapValues {
  // Weighted estimates (exact in exact mode): the objects and bytes
  // allocated in the window, and those alive at the flush.
  int64_t alloc_objects = 0, alloc_space = 0;
  int64_t inuse_objects = 0, inuse_space = 0;
  // Unweighted: the sample records behind alloc_* and behind inuse_*.
  int64_t alloc_samples = 0, inuse_samples = 0;

  static constexpr SampleField<HeapValues> kSchema[] = {
      {"alloc_objects", "count", &HeapValues::alloc_objects},
      {"alloc_space", "bytes", &HeapValues::alloc_space},
      {"inuse_objects", "count", &HeapValues::inuse_objects},
      {"inuse_space", "bytes", &HeapValues::inuse_space},
      {"alloc_samples", "count", &HeapValues::alloc_samples, Combine::kSum, "alloc_"},
      {"inuse_samples", "count", &HeapValues::inuse_samples, Combine::kSum, "inuse_"},
  };
};
static_assert(CountsNamedForWhatTheyCount<HeapValues>(), "a count is named for the types it counts");

// What viewers show first.
inline constexpr const char* kHeapDefaultSampleType = "inuse_space";

}  // namespace fathom
