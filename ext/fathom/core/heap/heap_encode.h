// Heap profile encoding: HeapProfileRows (heap_rows.h) to gzipped pprof.
#pragma once

#include <string>

#include "heap/heap_rows.h"

namespace fathom {

// The comment line giving how many sample records stand behind the
// profile's alloc_* and inuse_* totals.
std::string SampleCountComment(const HeapProfileRows& rows);

// Encodes to gzipped pprof. Pure computation: safe to run without the GVL.
std::string EncodeHeapProfile(const HeapProfileRows& rows);

// Sample types counting the records behind each row (unweighted).
inline constexpr const char* kAllocSamplesType = "alloc_samples";
inline constexpr const char* kInuseSamplesType = "inuse_samples";

}  // namespace fathom
