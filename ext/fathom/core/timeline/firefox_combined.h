// One Firefox Profiler file for several profilers of one run
// (`--mode cpu,gc,heap --format firefox`): the CPU/wall tracks (one per
// thread, with threadCPUDelta), the "Garbage Collection" track and the heap
// profiler's sampled allocations in each thread's jsAllocations table, all
// on one time base. Pure C++; no Ruby headers.
#pragma once

#include <string>

#include "cpu/cpu_profile.h"
#include "gc/gc_profile.h"
#include "heap/heap_rows.h"

namespace fathom {

// Any of the three may be null (at least one must not be). Times: every
// part carries its own start on CLOCK_MONOTONIC; the profile starts at the
// earliest, and meta.startTime is that part's wall-clock start.
//
// Allocations go on the CPU track of the thread that allocated them: the
// heap profiler labels a thread "main", its Thread#name, or
// "thread <native id>", which is matched to the main thread (tid = pid),
// a CPU track of the same name, or the track of that native id; anything
// else (a thread the CPU sampler never saw) goes on the main thread. Without
// CPU data they go on one "ruby" main track.
//
// Each allocation's stack ends in a frame naming its class,
// AllocatedClassFrameName(class): the profiler shows className nowhere.
std::string EncodeCombinedFirefox(const CpuProfileData* cpu, const GcProfileData* gc, const HeapProfileRows* heap,
                                  bool gzip);

// "new String". `fathom report` recognises the leaf by this name; keep the
// two in step (lib/fathom/report/firefox_tables.rb CLASS_FRAME).
inline std::string AllocatedClassFrameName(const std::string& class_name) { return "new " + class_name; }

}  // namespace fathom
