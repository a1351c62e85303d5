// StepCpuSampler: which GC steps read the thread's CPU clock, and the CPU
// time of those that did not. Pure C++; GcTracker (gc_tracker.h) asks it at
// every step, inside Ruby's GC hooks: no allocation, a few integer fields.
//
// Why sample at all. The thread CPU clock is a system call (no vDSO): 1.6 us
// of CPU per read on these VMs (C loop, 2026-12), two reads per step, against
// lazy-sweep steps of 10-30 us. Reading it on every step cost ~3% of an
// allocation loop on Ruby 3.3 (docs/internals/gc.md, "CPU time is sampled").
//
// What is always measured (by GcTracker, not here): every step of a major
// GC, including the one it starts in (read at GC_START when the step's
// start was not). Those are the long steps, and their CPU is exact. What is
// left are the minor GCs' steps (their marking, lazy sweeping, the "rest"
// of a sweep before the next GC): one in `stride` of them is measured.
//
// How the others are estimated, and why not as before. A step left
// unmeasured is charged its wall time times the CPU/wall ratio of the
// recent measured steps like it. That is right while the thread runs
// through its steps (ratio ~0.95, as the measured ones say), and wrong when
// the process is descheduled inside a step: that step's wall time grows by
// a scheduler slice (1-8 ms here, beside CPU hogs) while its CPU stays
// ~40 us, and a ratio learned from other steps charges it milliseconds of
// CPU it never used. A trace with both clocks read on every step (3.1.2,
// 50 GC.start among 10M short-lived strings, load 12 on 2 cores) had 8,488
// steps of minor GCs, 131 of them descheduled: 939 of their 1,525 ms of
// wall time, for 694 ms of CPU in all. Replayed over it, a ratio per
// group of 40 steps (like the old estimate per 10 ms period) read +64% to
// +94%; one ratio over the whole run -22% to +22%, depending on which
// steps the stride hit; a ratio per wall-time bucket -18% to +38%. So the
// sampler does not guess there: when a measured step (of any kind) shows
// that the thread spent less than half of it, and at least kLostMinNs less
// than its wall time, on the CPU, every step is measured for the next
// `hot_steps` steps, and each such step re-arms it. Replayed, the
// estimate is then within +0% to +1.7% whichever steps the stride hits:
// under load nearly every step is measured; on a quiet machine no step is descheduled and the stride
// stays. The price is the full clock cost (~3% of an allocation loop) for
// as long as the machine is busy enough to deschedule the GC.
//
// Header-only, like pause_histogram.h: a few integer operations per step.
#pragma once

#include <algorithm>
#include <cstdint>

namespace fathom {

class StepCpuSampler {
 public:
  struct Config {
    uint32_t stride = 8;        // measure one candidate step in this many (1: all)
    uint32_t hot_steps = 1024;  // steps measured after one that was descheduled
  };

  // A measured step counts as descheduled when the thread ran for less than
  // half of it and was off the CPU for at least this long. 100 us: far below
  // a scheduler time slice (milliseconds; the descheduled steps of the trace
  // above lost 1-8 ms each), far above the clock reads' own cost (~1.6 us).
  static constexpr int64_t kLostMinNs = 100 * 1000;
  // The ratio is learned from the latest 64-128 measured candidate steps:
  // the sums are halved when their count passes this (recent load counts
  // more than old).
  static constexpr uint32_t kRatioWindow = 64;

  explicit StepCpuSampler(Config config);

  // Whether the step about to begin should read the CPU clock at its start.
  // `candidate`: GcTracker does not measure it anyway (it is not a major
  // GC's).
  bool WantsCpu(bool candidate) const {
    return !candidate || hot_left_ > 0 || config_.stride <= 1 || candidates_ % config_.stride == 0;
  }
  // The step begins: counts it for the stride and the hot window.
  void BeginStep(bool candidate);

  // A measured step: `wall_ns` in all, of which the CPU clock covered the
  // last `measured_wall_ns` (all of it, or from GC_START on) and read
  // `measured_cpu_ns`. Returns the step's CPU time: the measured CPU plus
  // the uncovered head at the covered part's ratio, never above wall_ns.
  // `typical`: the step is like the ones left unmeasured (no major GC's),
  // so its ratio teaches Estimate().
  int64_t Measured(int64_t wall_ns, int64_t measured_wall_ns, int64_t measured_cpu_ns, bool typical);

  // An unmeasured step of `wall_ns`: its estimated CPU time (<= wall_ns).
  int64_t Estimate(int64_t wall_ns) const;

  // Whether every step is being measured because one was descheduled.
  bool hot() const { return hot_left_ > 0; }
  // Times a descheduled step (re)armed the hot window.
  uint64_t descheduled_steps() const { return descheduled_steps_; }

  void Reset();

 private:
  Config config_;
  uint64_t candidates_ = 0;   // candidate steps begun (the stride's counter)
  uint32_t hot_left_ = 0;     // steps still to measure after a descheduled one
  uint64_t descheduled_steps_ = 0;
  int64_t ratio_wall_ns_ = 0, ratio_cpu_ns_ = 0;  // recent measured typical steps
  uint32_t ratio_steps_ = 0;
};

inline StepCpuSampler::StepCpuSampler(Config config) : config_(config) {}

inline void StepCpuSampler::BeginStep(bool candidate) {
  if (hot_left_ > 0) --hot_left_;
  if (candidate) ++candidates_;
}

inline int64_t StepCpuSampler::Measured(int64_t wall_ns, int64_t measured_wall_ns, int64_t measured_cpu_ns,
                                        bool typical) {
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

inline int64_t StepCpuSampler::Estimate(int64_t wall_ns) const {
  wall_ns = std::max<int64_t>(wall_ns, 0);
  // Nothing learned yet: CPU time cannot exceed wall time, and on a quiet
  // machine the two are within a few percent.
  if (ratio_wall_ns_ <= 0) return wall_ns;
  // double: the product of two nanosecond sums overflows int64 past ~3 s each.
  double ratio = std::min(1.0, static_cast<double>(ratio_cpu_ns_) / static_cast<double>(ratio_wall_ns_));
  return static_cast<int64_t>(static_cast<double>(wall_ns) * ratio);
}

inline void StepCpuSampler::Reset() {
  candidates_ = 0;
  hot_left_ = 0;
  descheduled_steps_ = 0;
  ratio_wall_ns_ = ratio_cpu_ns_ = 0;
  ratio_steps_ = 0;
}

}  // namespace fathom
