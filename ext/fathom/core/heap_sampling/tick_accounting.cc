#include "heap_sampling/tick_accounting.h"

#include <algorithm>

namespace fathom {

std::string TickComment(const TickCounts& c) {
  return "Sampling: " + std::to_string(c.bursts) + " bursts from " + std::to_string(c.eligible()) +
         " timer ticks that could start one (of " + std::to_string(c.ticks) + "; " + std::to_string(c.armed_skips) +
         " while a burst waited for an allocation, " + std::to_string(c.idle) + " with no thread running Ruby)";
}

bool MostTicksLost(const TickCounts& c) { return c.eligible() >= 20 && c.lost() * 2 > c.eligible(); }

TickPacer::Reading* TickPacer::Find(int tid) {
  for (Reading& r : readings_)
    if (r.tid == tid) return &r;
  return nullptr;
}

TickPacer::Reading* TickPacer::Slot(int tid) {
  for (Reading& r : readings_)
    if (r.tid == 0) return &(r = Reading{tid, 0});
  // Round-robin replacement: runners beyond 8 at once are rare (a runner is
  // a thread that ran a job), and a dropped one is only "new" again.
  Reading& r = readings_[next_slot_];
  next_slot_ = (next_slot_ + 1) % kReadings;
  return &(r = Reading{tid, 0});
}

TickPacer::Verdict TickPacer::Credit(int64_t used) {
  owed_ns_ += used;
  if (owed_ns_ < interval_ns_) return Verdict::kWait;
  // At most one interval carried over: a runner back from a long stretch
  // without ticks (hook armed, job pending) gets one tick, not a volley.
  owed_ns_ -= interval_ns_;
  if (owed_ns_ > interval_ns_) owed_ns_ = interval_ns_;
  return Verdict::kTick;
}

TickPacer::Verdict TickPacer::Wake(int runner, int64_t cpu_ns) {
  if (cpu_ns == 0) {  // the thread is gone, or its clock unreadable
    if (Reading* r = Find(runner)) *r = Reading{};
    runner_ = runner;
    owed_ns_ = 0;
    return Verdict::kTick;
  }
  Reading* reading = Find(runner);
  if (reading == nullptr) {  // never seen: its CPU before now is unknown
    Slot(runner)->cpu_ns = cpu_ns;
    runner_ = runner;
    owed_ns_ = 0;
    return Verdict::kTick;
  }
  int64_t used = cpu_ns - reading->cpu_ns;
  reading->cpu_ns = cpu_ns;
  bool same = runner == runner_;
  runner_ = runner;
  if (used <= 0) return same ? Verdict::kStalled : Verdict::kWait;
  return Credit(used);
}

TickPacer::Verdict TickPacer::WakeHeld(bool owner, int64_t held_cpu_ns) {
  if (held_base_ns_ < 0) {  // the first wake: due at once, as a new runner
    held_base_ns_ = held_cpu_ns;
    owed_ns_ = 0;
    return owner ? Verdict::kTick : Verdict::kStalled;
  }
  int64_t used = held_cpu_ns - held_base_ns_;
  if (used > 0) held_base_ns_ = held_cpu_ns;
  if (!owner) {
    // Nobody to signal: keep what was used (up to a tick's worth) for the
    // next owner.
    if (used > 0) owed_ns_ = std::min(owed_ns_ + used, interval_ns_);
    return Verdict::kStalled;
  }
  if (used <= 0) return Verdict::kStalled;
  return Credit(used);
}

}  // namespace fathom
