#include "gc/gc_counter_poll.h"

#include <algorithm>
#include <cstdint>

namespace fathom {

namespace {

uint32_t Clamp32(uint64_t n) { return static_cast<uint32_t>(std::min<uint64_t>(n, UINT32_MAX)); }

}  // namespace

// One period for everything the reading saw since last_. The latest GC's
// type comes from latest_gc_info; its labels are the only ones Ruby keeps.
GcPeriod GcCounterPoll::MakePeriod(const GcCounterReading& r, uint64_t minors, uint64_t majors) const {
  int64_t cpu_ns = static_cast<int64_t>(r.time_ms - last_.time_ms) * 1000 * 1000;
  GcPeriod p;
  p.end_ns = r.now_ns;
  p.start_ns = std::max(last_.now_ns, r.now_ns - cpu_ns);
  p.cpu_ns = cpu_ns;
  // wall_ns and steps stay 0: not measured (see the header).
  p.minor_gcs = Clamp32(minors);
  p.major_gcs = Clamp32(majors);
  p.cycles_started = Clamp32(minors + majors);
  p.cycles_finished = p.cycles_started;
  p.type = r.latest_type == GcType::kMajor ? GcType::kMajor : GcType::kMinor;
  p.reason = p.type == GcType::kMajor ? r.latest_reason : GcReason::kNone;
  p.cause = r.latest_cause;
  return p;
}

void GcCounterPoll::Begin(const GcCounterReading& r) { last_ = r; }

void GcCounterPoll::Poll(const GcCounterReading& r, std::vector<GcPeriod>* out) {
  stats_.polls++;
  if (r.count < last_.count || r.minor_count < last_.minor_count || r.major_count < last_.major_count ||
      r.time_ms < last_.time_ms) {
    last_ = r;
    return;
  }
  uint64_t cycles = r.count - last_.count;
  if (cycles == 0) {
    last_.now_ns = r.now_ns;
    return;
  }
  stats_.polls_with_gc++;
  stats_.cycles += cycles;
  uint64_t minors = r.minor_count - last_.minor_count;
  uint64_t majors = r.major_count - last_.major_count;
  // GC.count and the per-type counts are bumped at the same place in gc.c;
  // should they ever disagree, GC.count decides and the latest type gets the rest.
  if (minors + majors != cycles) {
    if (r.latest_type == GcType::kMajor) {
      majors = cycles > minors ? cycles - minors : 0;
      minors = cycles - majors;
    } else {
      minors = cycles > majors ? cycles - majors : 0;
      majors = cycles - minors;
    }
  }
  out->push_back(MakePeriod(r, minors, majors));
  stats_.periods++;
  last_ = r;
}

}  // namespace fathom
