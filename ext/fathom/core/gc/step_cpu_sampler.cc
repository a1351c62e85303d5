#include "gc/step_cpu_sampler.h"

#include <algorithm>

namespace fathom {

StepCpuSampler::StepCpuSampler(Config config) : config_(config) {}

bool StepCpuSampler::BeginStep(bool candidate) {
  bool hot = hot_left_ > 0;
  if (hot) --hot_left_;
  if (!candidate) return true;
  bool strided = config_.stride <= 1 || candidates_ % config_.stride == 0;
  ++candidates_;
  return hot || strided;
}

int64_t StepCpuSampler::Measured(int64_t wall_ns, int64_t measured_wall_ns, int64_t measured_cpu_ns, bool typical) {
  wall_ns = std::max<int64_t>(wall_ns, 0);
  measured_wall_ns = std::clamp<int64_t>(measured_wall_ns, 0, wall_ns);
  measured_cpu_ns = std::clamp<int64_t>(measured_cpu_ns, 0, measured_wall_ns);
  if (measured_wall_ns - measured_cpu_ns >= kLostMinNs && measured_cpu_ns * 2 < measured_wall_ns) {
    hot_left_ = config_.hot_steps;
    ++descheduled_steps_;
  }
  if (typical && measured_wall_ns > 0) {
    ratio_wall_ns_ += measured_wall_ns;
    ratio_cpu_ns_ += measured_cpu_ns;
    if (++ratio_steps_ > kRatioWindow) {
      ratio_wall_ns_ /= 2;
      ratio_cpu_ns_ /= 2;
      ratio_steps_ /= 2;
    }
  }
  // The head of the step before the clock was read (GC_ENTER to GC_START:
  // a few microseconds of setup) ran at the rest of the step's ratio.
  int64_t head = wall_ns - measured_wall_ns;
  if (head == 0 || measured_wall_ns == 0) return measured_cpu_ns;
  double ratio = static_cast<double>(measured_cpu_ns) / static_cast<double>(measured_wall_ns);
  return std::min(wall_ns, measured_cpu_ns + static_cast<int64_t>(static_cast<double>(head) * ratio));
}

int64_t StepCpuSampler::Estimate(int64_t wall_ns) const {
  wall_ns = std::max<int64_t>(wall_ns, 0);
  // Nothing learned yet: CPU time cannot exceed wall time, and on a quiet
  // machine the two are within a few percent.
  if (ratio_wall_ns_ <= 0) return wall_ns;
  // double: the product of two nanosecond sums overflows int64 past ~3 s each.
  double ratio = std::min(1.0, static_cast<double>(ratio_cpu_ns_) / static_cast<double>(ratio_wall_ns_));
  return static_cast<int64_t>(static_cast<double>(wall_ns) * ratio);
}

void StepCpuSampler::Reset() {
  candidates_ = 0;
  hot_left_ = 0;
  descheduled_steps_ = 0;
  ratio_wall_ns_ = ratio_cpu_ns_ = 0;
  ratio_steps_ = 0;
}

}  // namespace fathom
