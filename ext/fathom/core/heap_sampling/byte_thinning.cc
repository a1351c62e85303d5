#include "heap_sampling/byte_thinning.h"

#include <algorithm>
#include <cmath>

namespace fathom {
namespace {

// Step of the threshold's multiplicative update per candidate. Small
// enough that one odd burst (64 candidates) moves it by ~25% at most,
// large enough that a new size mix is followed within a few ticks.
constexpr double kAdaptRate = 0.02;

}  // namespace

ByteThinning::ByteThinning(double keep_fraction, double min_threshold, double max_threshold, double initial_threshold)
    : keep_fraction_(keep_fraction),
      min_threshold_(min_threshold),
      max_threshold_(max_threshold),
      threshold_(std::clamp(initial_threshold, min_threshold, max_threshold)) {}

double ByteThinning::KeepProbability(uint64_t bytes) {
  double p = std::min(1.0, static_cast<double>(bytes) / threshold_);
  if (!(p > 0)) p = 1.0 / threshold_;  // a zero size still gets a chance (and a finite weight)
  // Stochastic approximation of E[p] = keep_fraction: kept too many, raise
  // the threshold; too few, lower it. Deterministic in p (not in the coin).
  threshold_ = std::clamp(threshold_ * std::exp(kAdaptRate * (p - keep_fraction_) / keep_fraction_), min_threshold_,
                          max_threshold_);
  return p;
}

uint64_t ByteThinning::ScaledWeight(uint64_t weight, double p, double u) {
  if (p >= 1.0) return weight;
  double scaled = static_cast<double>(weight) / p;
  double whole = std::floor(scaled);
  return static_cast<uint64_t>(whole) + (u < scaled - whole ? 1 : 0);
}

}  // namespace fathom
