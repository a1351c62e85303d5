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

GcTracker::GcTracker(Config config)
    : config_(config), cpu_sampler_(StepCpuSampler::Config{config.cpu_stride, config.cpu_hot_steps}) {
  config_.ring_capacity = std::max<size_t>(config_.ring_capacity, 1);
  ring_.resize(config_.ring_capacity);
}

bool GcTracker::WantsCpu() const { return cpu_sampler_.WantsCpu(!major_in_progress_); }

void GcTracker::OnStepEnter(int64_t wall_ns, int64_t cpu_ns) {
  in_step_ = true;
  step_wall_start_ = wall_ns;
  step_cpu_start_ = step_cpu_wall_start_ = 0;
  // A major GC's steps are all measured; whether this step starts one is
  // known only at GC_START (StepNeedsCpuStart then).
  step_exact_ = major_in_progress_;
  step_idle_ = !cycle_in_progress_;
  cpu_sampler_.BeginStep(!step_exact_);
  OnStepCpuStart(wall_ns, cpu_ns);
}

void GcTracker::OnStepCpuStart(int64_t wall_ns, int64_t cpu_ns) {
  if (!in_step_ || cpu_ns <= 0) return;
  step_cpu_start_ = cpu_ns;
  step_cpu_wall_start_ = wall_ns;
}

void GcTracker::OnCycleStart(GcType type, GcReason reason, GcCause cause, int64_t heap_live_slots) {
  ++stats_.cycles;
  // The step in progress starts a major GC: measured from here if not
  // already. (A minor GC's first step stays with the stride: minors are
  // frequent, a quarter of an allocation loop's steps on 3.3.8, and
  // reading the clock on all of them cost ~1% of such a loop.)
  if (in_step_ && type == GcType::kMajor) step_exact_ = true;
  if (in_step_) step_idle_ = false;
  major_in_progress_ = type == GcType::kMajor;
  cycle_in_progress_ = true;
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
  major_in_progress_ = cycle_in_progress_ = false;
}

bool GcTracker::OnStepExit(int64_t wall_ns, int64_t cpu_ns) {
  if (!in_step_) {
    ++stats_.unmatched_exits;
    return false;
  }
  in_step_ = false;
  if (step_idle_) {
    ++stats_.idle_steps;
    step_cpu_start_ = step_cpu_wall_start_ = 0;
    return false;
  }
  // Clocks are monotonic, but a CPU clock read can fail (returns 0): never
  // let a bad read make a negative duration (the sampler clamps too).
  int64_t wall = std::max<int64_t>(wall_ns - step_wall_start_, 0);
  int64_t cpu;
  if (cpu_ns > 0 && step_cpu_start_ > 0) {
    cpu = cpu_sampler_.Measured(wall, wall_ns - step_cpu_wall_start_, cpu_ns - step_cpu_start_, !step_exact_);
    ++stats_.cpu_measured_steps;
    stats_.descheduled_steps = cpu_sampler_.descheduled_steps();
  } else {
    cpu = cpu_sampler_.Estimate(wall);
  }
  step_cpu_start_ = step_cpu_wall_start_ = 0;
  if (open_.steps == 0) open_.start_ns = step_wall_start_;
  open_.end_ns = wall_ns;
  open_.wall_ns += wall;
  open_.cpu_ns += cpu;
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

void GcTracker::Reset(int64_t now_ns, bool gc_in_progress) {
  open_ = GcPeriod();
  in_step_ = false;
  step_cpu_start_ = step_cpu_wall_start_ = 0;
  step_exact_ = major_in_progress_ = step_idle_ = false;
  // A major under way is not known to be one: its steps are sampled until
  // the next GC_START.
  cycle_in_progress_ = gc_in_progress;
  cpu_sampler_.Reset();
  major_finished_in_period_ = false;
  last_close_ns_ = now_ns;
  ring_head_ = ring_size_ = 0;
  pauses_.Clear();
  stats_ = Stats();
}

}  // namespace fathom
