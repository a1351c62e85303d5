#include "heap/tick_accounting.h"

namespace fathom {

std::string TickComment(const TickCounts& c) {
  return "Sampling: " + std::to_string(c.bursts) + " bursts from " + std::to_string(c.eligible()) +
         " timer ticks that could start one (of " + std::to_string(c.ticks) + "; " + std::to_string(c.armed_skips) +
         " while a burst waited for an allocation, " + std::to_string(c.idle) + " with no thread running Ruby)";
}

bool MostTicksLost(const TickCounts& c) { return c.eligible() >= 20 && c.lost() * 2 > c.eligible(); }

TickPacer::Verdict TickPacer::Wake(int runner, int64_t cpu_ns) {
  if (runner != runner_ || cpu_ns == 0) {
    runner_ = runner;
    last_cpu_ns_ = cpu_ns;
    owed_ns_ = 0;
    return Verdict::kTick;
  }
  int64_t used = cpu_ns - last_cpu_ns_;
  last_cpu_ns_ = cpu_ns;
  if (used <= 0) return Verdict::kStalled;
  owed_ns_ += used;
  if (owed_ns_ < interval_ns_) return Verdict::kWait;
  // At most one interval carried over: a runner back from a long stretch
  // without ticks (hook armed, job pending) gets one tick, not a volley.
  owed_ns_ -= interval_ns_;
  if (owed_ns_ > interval_ns_) owed_ns_ = interval_ns_;
  return Verdict::kTick;
}

}  // namespace fathom
