// Heap profile encoding: HeapProfileRows (heap_rows.h) to gzipped pprof,
// its sample types and values as the schema says (heap_schema.h), with the
// comment saying how many sample records stand behind its estimates
// (SampleCountComment, encode/sample_schema.h).
#pragma once

#include <string>

#include "heap/heap_rows.h"

namespace fathom {

// Encodes to gzipped pprof. Pure computation: safe to run without the GVL.
std::string EncodeHeapProfile(const HeapProfileRows& rows);

}  // namespace fathom
