// Fathom::Native::FirefoxParts: the data of several profilers of one run,
// taken from each (with the GVL) and encoded together into one Firefox
// Profiler file without the GVL (core/timeline/firefox_combined.h).
//
//   parts = Fathom::Native::FirefoxParts.new
//   cpu_collector.flush_into(parts)          # CpuProfileData
//   gc_collector.flush_into(parts)           # GcProfileData
//   heap_collector.flush_into(parts, gc)     # HeapProfileRows with allocations
//   parts.encode(gzip)                       # -> String
#pragma once

#include <ruby.h>

#include <memory>

#include "cpu/cpu_profile.h"
#include "gc/gc_profile.h"
#include "heap/heap_rows.h"

namespace fathom {

struct FirefoxParts {
  std::unique_ptr<CpuProfileData> cpu;
  std::unique_ptr<GcProfileData> gc;
  std::unique_ptr<HeapProfileRows> heap;
};

// The parts inside a FirefoxParts object (TypeError for anything else).
FirefoxParts* UnwrapFirefoxParts(VALUE parts);

}  // namespace fathom
