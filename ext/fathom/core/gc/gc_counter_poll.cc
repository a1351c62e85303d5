#include "gc/gc_counter_poll.h"

#include <algorithm>

namespace fathom {

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
  int64_t time_ns = static_cast<int64_t>(r.time_ms - last_.time_ms) * 1000 * 1000;
  int64_t start = std::max(last_.now_ns, r.now_ns - time_ns);

  GcType latest = r.latest_type == GcType::kMajor ? GcType::kMajor : GcType::kMinor;
  auto emit = [&](GcType type, uint64_t n) {
    if (n == 0) return;
    GcPeriod p;
    p.start_ns = start;
    p.end_ns = r.now_ns;
    bool is_latest = type == latest;
    p.wall_ns = is_latest ? time_ns : 0;
    p.cpu_ns = p.wall_ns;
    p.steps = 0;  // not known without hooks
    p.cycles_started = static_cast<uint32_t>(std::min<uint64_t>(n, UINT32_MAX));
    p.cycles_finished = p.cycles_started;
    p.type = type;
    p.reason = is_latest && type == GcType::kMajor ? r.latest_reason : GcReason::kNone;
    p.cause = is_latest ? r.latest_cause : GcCause::kUnseen;
    out->push_back(p);
    stats_.periods++;
  };
  // The latest type last, so a timeline shows it on top.
  if (latest == GcType::kMajor) {
    emit(GcType::kMinor, minors);
    emit(GcType::kMajor, majors);
  } else {
    emit(GcType::kMajor, majors);
    emit(GcType::kMinor, minors);
  }
  last_ = r;
}

}  // namespace fathom
