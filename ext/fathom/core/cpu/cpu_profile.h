// CPU / wall profile encoding: a self-contained copy of a CpuAggregate with
// its frames already symbolized (the Ruby layer copies it with the GVL and
// encodes without it), turned into pprof.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "encode/output_stamp.h"
#include "cpu/cpu_aggregate.h"
#include "stacks/frames.h"
#include "labels/label_sets.h"

namespace fathom {

namespace firefox {
class Profile;
class Thread;
}  // namespace firefox

// Frames of samples without a Ruby stack (taken while a GC ran).
inline constexpr const char* kCpuGcFrameName = "Garbage Collection";
inline constexpr const char* kCpuNoStackFrameName = "(stack not read: GC running)";

const char* CpuModeName(CpuMode mode);

struct CpuProfileData {
  struct Row {
    std::vector<StackFrame> stack;  // leaf first, indexing symbols
    bool truncated = false;
    int32_t thread_id = 0;
    ThreadState state = ThreadState::kUnknown;
    CpuValues values;
    CpuLabels labels;  // written with label_sets (AppendPprofLabels)
  };
  // The timeline (Firefox output only): samples in time order, each on a
  // stack of timeline_stacks.
  struct TimelineStack {
    std::vector<StackFrame> stack;  // leaf first, indexing symbols
    uint32_t native_id = 0;  // the aggregate's native stack (woven in by the Ruby layer)
  };
  std::vector<TimelineStack> timeline_stacks;
  std::vector<CpuTimelineSample> timeline;  // stack_id indexes timeline_stacks
  int64_t start_monotonic_ns = 0;
  int64_t pid = 0;
  CpuMode mode = CpuMode::kCpu;
  int64_t interval_ns = 0;
  int64_t start_realtime_ns = 0;
  int64_t duration_ns = 0;
  std::vector<FrameSymbol> symbols;
  std::vector<Row> rows;
  std::map<int32_t, std::string> thread_names;  // thread id -> name (absent: "")
  uint64_t dropped = 0;  // samples lost because the ring was full
  // Where the state label comes from: "thread-events" (Ruby 3.2+ GVL
  // events) or "gvl-flag" (3.1: only whether the thread was inside a
  // blocking region; GVL waits cannot be told apart).
  std::string state_source;
  // Who wrote it (pid, hostname, Ruby, window; core/encode/output_stamp.h),
  // for a profile that leaves the process. pprof output only.
  OutputStamp stamp;
  // The request labels of rows' label_set ids (append-only, so it may be
  // read here while Ruby threads intern more); null: rows carry none.
  const LabelSets* label_sets = nullptr;
};

// Gzipped pprof. Sample types as CpuValues' schema says (samples/count,
// cpu/nanoseconds, wall/nanoseconds; the default is cpu or wall by mode;
// the period type too, with the mean sampling interval). Labels: "thread
// id" (number), "thread name", "state" (running, gvl-wait, blocked, gc),
// and "gvl" = "released" on running samples of a thread in C without the
// GVL; then the row's CpuLabels (AppendPprofLabels: its request labels as
// string labels, and "span_id" when it has one). Comments:
// "fathom.cpu.mode=cpu interval_ns=N dropped=N states=thread-events".
std::string EncodeCpuPprof(const CpuProfileData& data);


// The Firefox Profiler processed format (firefox_profile.h): one track per
// thread; each sample weighted by its CPU time (cpu mode) or wall time
// (wall mode) in ms, its frames in the category of its state; an interval
// marker per run of gvl-wait, blocked or gc samples. JSON, gzipped when gzip.
std::string EncodeCpuFirefox(const CpuProfileData& data, bool gzip);

// The same tracks added to an existing profile (the combined cpu+gc+heap
// file), with times shifted by offset_ms (this data's start after the
// profile's). Adds its categories and the ThreadState schema. Returns the
// track of each thread id.
std::map<int32_t, firefox::Thread*> AddCpuTracks(firefox::Profile& profile, const CpuProfileData& data,
                                                 double offset_ms);

}  // namespace fathom
