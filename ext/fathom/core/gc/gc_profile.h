// GC profile encoding: the periods a GcTracker closed, turned into pprof
// (GC as a pseudo-thread on one placeholder frame) or into a Firefox
// Profiler timeline. Pure computation on a self-contained GcProfileData, so
// the Ruby side copies the data under the GVL and encodes without it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "encode/output_stamp.h"
#include "gc/gc_tracker.h"
#include "gc/pause_histogram.h"

namespace fathom {

enum class GcSource : uint8_t { kHooks = 0, kCounters };

struct GcProfileData {
  std::vector<GcPeriod> periods;
  PauseHistogram pauses;
  GcTracker::Stats stats;
  int64_t start_realtime_ns = 0;   // wall clock when profiling started (Unix epoch)
  int64_t start_monotonic_ns = 0;  // CLOCK_MONOTONIC at the same moment
  int64_t end_monotonic_ns = 0;    // when the data was taken
  int64_t flush_interval_ns = 0;   // the coalescing interval (0 = off)
  int64_t pid = 0;
  // Where the periods came from: kHooks (GC event hooks: every step, pause
  // percentiles) or kCounters (Ruby's GC counters read every
  // poll_interval_ns: no per-step data; see gc_counter_poll.h).
  GcSource source = GcSource::kHooks;
  int64_t poll_interval_ns = 0;
  // Who wrote it (pid, hostname, Ruby, window; core/encode/output_stamp.h),
  // for a profile that leaves the process. pprof output only.
  OutputStamp stamp;
};

// "hooks" / "counters": the value of the "fathom.gc.source=" comment.
const char* GcSourceName(GcSource source);
// The comment naming the source and what it cannot show, e.g.
// "fathom.gc.source=counters poll_ns=10000000".
std::string GcSourceComment(const GcProfileData& data);

// The frame every GC sample sits on, and the thread label GC samples carry.
inline constexpr const char* kGcFrameName = "Garbage Collection";
inline constexpr const char* kGcThreadLabel = "GC";

// Gzipped pprof, one placeholder frame ("Garbage Collection"), labels
// thread=GC, "gc type", "gc cause", and "gc reason" for major GCs. Periods
// with the same labels merge into one sample, as pprof does. The source is
// the comment "fathom.gc.source=hooks" or "fathom.gc.source=counters poll_ns=N".
// Sample types say what the source measured:
//  - hooks: wall/nanoseconds (default), cpu/nanoseconds, gc_steps/count and
//    gcs/count (GC cycles started; how `fathom report` counts minor and
//    major GCs); the pause distribution (per step) is the comment
//    "fathom.gc.pauses count=N total_ns=… max_ns=… p50_ns=… p90_ns=… p99_ns=…";
//  - counters: cpu/nanoseconds (default: GC.stat(:time), process CPU time
//    in GC) and gcs/count only. No wall time, steps or pauses are measured,
//    and they are left out rather than written as zeros.
std::string EncodeGcPprof(const GcProfileData& data);

// The pause-distribution comment line (also used by tests).
std::string GcPauseComment(const PauseHistogram& pauses);

}  // namespace fathom
