#include "gc/gc_tracker.h"

#include <algorithm>

namespace fathom {

const char* GcTypeName(GcType type) {
  switch (type) {
    case GcType::kMinor: return "minor";
    case GcType::kMajor: return "major";
    default: return "unknown";
  }
}

const char* GcReasonName(GcReason reason) {
  switch (reason) {
    case GcReason::kNone: return "";
    case GcReason::kNofree: return "nofree";
    case GcReason::kOldgen: return "oldgen";
    case GcReason::kShady: return "shady";
    case GcReason::kForce: return "force";
    case GcReason::kOldmalloc: return "oldmalloc";
    default: return "unknown";
  }
}

const char* GcCauseName(GcCause cause) {
  switch (cause) {
    case GcCause::kNewobj: return "newobj";
    case GcCause::kMalloc: return "malloc";
    case GcCause::kMethod: return "method";
    case GcCause::kCapi: return "capi";
    case GcCause::kStress: return "stress";
    case GcCause::kUnseen: return "unseen";
    default: return "unknown";
  }
}

GcTracker::GcTracker(Config config) : config_(config) {
  config_.ring_capacity = std::max<size_t>(config_.ring_capacity, 1);
  ring_.resize(config_.ring_capacity);
}

bool GcTracker::WantsCpu() const {
  return open_.steps == 0 || open_.type == GcType::kMajor || config_.cpu_stride <= 1 ||
         stats_.steps % config_.cpu_stride == 0;
}

void GcTracker::OnStepEnter(int64_t wall_ns, int64_t cpu_ns) {
  in_step_ = true;
  step_wall_start_ = wall_ns;
  step_cpu_start_ = cpu_ns;
}

void GcTracker::OnCycleStart(GcType type, GcReason reason, GcCause cause, int64_t heap_live_slots) {
  ++stats_.cycles;
  bool same_kind = open_.type == type && open_.reason == reason && open_.cause == cause;
  // A period's labels must hold for all of its steps: a different kind of
  // cycle starts a new period. (The step in progress belongs to the new cycle;
  // it is added to the new period when it exits.)
  if (!same_kind && open_.steps > 0) Close();
  open_.type = type;
  open_.reason = reason;
  open_.cause = cause;
  ++open_.cycles_started;
  if (open_.heap_live_before < 0) open_.heap_live_before = heap_live_slots;
}

void GcTracker::OnCycleEnd(int64_t heap_live_slots) {
  ++open_.cycles_finished;
  open_.heap_live_after = heap_live_slots;
  if (open_.type == GcType::kMajor) major_finished_in_period_ = true;
}

bool GcTracker::OnStepExit(int64_t wall_ns, int64_t cpu_ns) {
  if (!in_step_) {
    ++stats_.unmatched_exits;
    return false;
  }
  in_step_ = false;
  // Clocks are monotonic, but a CPU clock read can fail (returns 0): never
  // let a bad read make a negative duration.
  int64_t wall = std::max<int64_t>(wall_ns - step_wall_start_, 0);
  if (cpu_ns > 0 && step_cpu_start_ > 0) {
    measured_wall_ns_ += wall;
    measured_cpu_ns_ += std::max<int64_t>(cpu_ns - step_cpu_start_, 0);
  }
  step_cpu_start_ = 0;
  if (open_.steps == 0) open_.start_ns = step_wall_start_;
  open_.end_ns = wall_ns;
  open_.wall_ns += wall;
  ++open_.steps;
  ++stats_.steps;
  pauses_.Record(wall);

  bool due = wall_ns - last_close_ns_ >= config_.flush_interval_ns;
  if (due || (config_.flush_on_major && major_finished_in_period_)) {
    Close();
    last_close_ns_ = wall_ns;
    return true;
  }
  return false;
}

void GcTracker::Close() {
  ++stats_.periods_closed;
  // Unmeasured steps ran at the measured steps' CPU/wall ratio (double: the
  // product of two nanosecond sums overflows int64 past ~3 s each).
  if (measured_wall_ns_ == open_.wall_ns) {
    open_.cpu_ns = measured_cpu_ns_;  // every step measured (or none: 0)
  } else if (measured_wall_ns_ > 0) {
    double ratio = std::min(1.0, static_cast<double>(measured_cpu_ns_) / static_cast<double>(measured_wall_ns_));
    open_.cpu_ns = static_cast<int64_t>(static_cast<double>(open_.wall_ns) * ratio);
  }
  measured_wall_ns_ = measured_cpu_ns_ = 0;
  if (ring_size_ < ring_.size()) {
    ring_[(ring_head_ + ring_size_) % ring_.size()] = open_;
    ++ring_size_;
  } else {
    // Full: fold into the newest entry (the consumer is late; keep totals exact).
    GcPeriod& last = ring_[(ring_head_ + ring_size_ - 1) % ring_.size()];
    last.end_ns = open_.end_ns;
    last.wall_ns += open_.wall_ns;
    last.cpu_ns += open_.cpu_ns;
    last.steps += open_.steps;
    last.cycles_started += open_.cycles_started;
    last.cycles_finished += open_.cycles_finished;
    if (open_.type == GcType::kMajor) {
      last.type = open_.type;
      last.reason = open_.reason;
      last.cause = open_.cause;
    }
    if (open_.heap_live_after >= 0) last.heap_live_after = open_.heap_live_after;
    ++stats_.merged_on_overflow;
  }
  // The next period continues with the kind of the cycle in progress.
  GcPeriod next;
  next.type = open_.type;
  next.reason = open_.reason;
  next.cause = open_.cause;
  open_ = next;
  major_finished_in_period_ = false;
}

void GcTracker::Drain(std::vector<GcPeriod>* out) {
  while (ring_size_ > 0) {
    out->push_back(ring_[ring_head_]);
    ring_head_ = (ring_head_ + 1) % ring_.size();
    --ring_size_;
  }
}

bool GcTracker::CloseOpenPeriod() {
  if (open_.steps == 0) return false;
  Close();
  return true;
}

void GcTracker::Reset(int64_t now_ns) {
  open_ = GcPeriod();
  in_step_ = false;
  step_cpu_start_ = measured_wall_ns_ = measured_cpu_ns_ = 0;
  major_finished_in_period_ = false;
  last_close_ns_ = now_ns;
  ring_head_ = ring_size_ = 0;
  pauses_.Clear();
  stats_ = Stats();
}

}  // namespace fathom
