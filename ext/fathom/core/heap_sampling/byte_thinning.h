// ByteThinning: Horvitz-Thompson thinning of heap-sample candidates by size.
//
// Sampled mode looks at more allocations per timer tick than it keeps. The
// hook cannot know an object's size (Ruby builds the object after NEWOBJ),
// so every candidate gets its stack captured there; at commit, where the
// size is known, a candidate of `bytes` is kept with probability
//   p = min(1, bytes / threshold)
// and its weight multiplied by 1/p. The estimate of any sum over objects
// (allocated or live bytes or counts of a site) stays unbiased: a candidate
// contributes w·x/p with probability p, i.e. w·x on average. What thinning
// saves is the per-kept-sample cost (the liveness token at commit and the
// liveness check at flush): objects of at least `threshold` bytes are all
// kept, and the many small ones are kept in proportion to their bytes,
// which is where their share of the heap is. See docs/internals/heap.md
// "Thinning by bytes" for the variance.
//
// The threshold adapts to the process (a budget, as Datadog's sampler
// adapts its rate): after each candidate it moves so that the mean keep
// probability tends to `keep_fraction`. It depends only on earlier
// candidates' sizes, never on the candidate's own coin, so the estimator
// stays unbiased while it moves.
#pragma once

#include <cstdint>

namespace fathom {

class ByteThinning {
 public:
  ByteThinning(double keep_fraction, double min_threshold, double max_threshold, double initial_threshold);

  double threshold() const { return threshold_; }
  double keep_fraction() const { return keep_fraction_; }

  // The probability with which a candidate of `bytes` is kept, with the
  // current threshold; then moves the threshold (Observe).
  double KeepProbability(uint64_t bytes);

  // weight / p rounded to an integer at random: up with probability equal
  // to the fraction, so that its expectation is exactly weight / p (profile
  // values are integers). `u` is uniform in [0, 1).
  static uint64_t ScaledWeight(uint64_t weight, double p, double u);

 private:
  double keep_fraction_;
  double min_threshold_, max_threshold_;
  double threshold_;
};

}  // namespace fathom
