// GcCounterPoll: GC periods from Ruby's own GC counters, read now and then,
// instead of from GC event hooks. Pure C++; the Ruby side reads the counters
// (rb_gc_count, rb_gc_stat, rb_gc_latest_gc_info) at a safe point and hands
// them over as a GcCounterReading.
//
// Why: on Ruby < 3.3 any GC event hook sends every allocation through Ruby's
// slow path (~+30% on an allocation loop; docs/internals/gc.md, "GC
// profiling"). Counters cost nothing between reads, but say less:
//   - no per-step data: no pause percentiles, no step count;
//   - the only time is GC.stat(:time): process CPU time in GC, in whole
//     milliseconds (gc.c measures it with CLOCK_PROCESS_CPUTIME_ID). The
//     wall time in GC is not known, so periods carry cpu_ns only (wall_ns
//     and steps stay 0 and the encoders leave them out);
//   - when several GCs happen between two reads, only the latest one's
//     type/reason/cause is known.
// So a read that saw GCs makes exactly one period: minor_gcs and major_gcs
// count them (exact), cpu_ns is their summed time, and type/reason/cause
// are the latest GC's. It ends at the read and starts its GC time earlier,
// never before the previous read.
#pragma once

#include <cstdint>
#include <vector>

#include "gc/gc_tracker.h"

namespace fathom {

struct GcCounterReading {
  int64_t now_ns = 0;        // CLOCK_MONOTONIC when read
  uint64_t count = 0;        // GC.count
  uint64_t minor_count = 0;  // GC.stat(:minor_gc_count)
  uint64_t major_count = 0;  // GC.stat(:major_gc_count)
  uint64_t time_ms = 0;      // GC.stat(:time)
  // GC.latest_gc_info: the latest GC's type, reason (major_by) and cause (gc_by).
  GcType latest_type = GcType::kUnknown;
  GcReason latest_reason = GcReason::kNone;
  GcCause latest_cause = GcCause::kUnknown;
};

class GcCounterPoll {
 public:
  struct Stats {
    uint64_t polls = 0;        // readings taken
    uint64_t polls_with_gc = 0;  // readings that saw at least one GC
    uint64_t cycles = 0;       // GCs seen (GC.count increments)
    uint64_t periods = 0;      // periods made (one per reading that saw a GC)
  };

  // The counters at start (or after fork): what happened before is not ours.
  void Begin(const GcCounterReading& r);
  // Appends the periods since the previous reading to *out (none if no GC
  // ran). Counters that went backwards (not expected) restart the baseline.
  void Poll(const GcCounterReading& r, std::vector<GcPeriod>* out);
  // Whether a reading with this GC.count would produce a period: lets the
  // caller skip the other reads when nothing happened.
  bool Changed(uint64_t count) const { return count != last_.count; }
  // Records a reading that saw no GC, cheaply (only its time and count matter).
  void NoteIdle(int64_t now_ns) {
    stats_.polls++;
    last_.now_ns = now_ns;
  }

  const Stats& stats() const { return stats_; }

 private:
  GcPeriod MakePeriod(const GcCounterReading& r, uint64_t minors, uint64_t majors) const;

  GcCounterReading last_;
  Stats stats_;
};

}  // namespace fathom
