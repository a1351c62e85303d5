// PauseHistogram: a fixed-size, log-linear histogram of durations (ns), in
// the spirit of HdrHistogram with 2 bits of sub-bucket precision.
//
// It exists so that GC pause percentiles can be reported although GC steps
// are coalesced (a step's own duration is otherwise lost): Record() runs
// inside Ruby's GC hooks, so it is a couple of integer operations on a
// preallocated array — no allocation, no branches that depend on history.
//
// Bucket i covers [lower(i), lower(i+1)): values below 4 get a bucket each,
// then every power of two is split in 4, so a reported percentile is within
// 25% of the truth (the estimate is the bucket's midpoint, clamped to the
// exact maximum). count, sum and max are exact.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>

namespace fathom {

class PauseHistogram {
 public:
  static constexpr int kSubBits = 2;
  // Values below 2^kSubBits, then 4 sub-buckets per power of two up to 2^63.
  static constexpr int kBuckets = (64 - kSubBits + 1) << kSubBits;

  void Record(int64_t ns) {
    if (ns < 0) ns = 0;
    uint64_t v = static_cast<uint64_t>(ns);
    ++counts_[BucketOf(v)];
    ++count_;
    sum_ += v;
    if (v > max_) max_ = v;
  }

  void Merge(const PauseHistogram& other) {
    for (int i = 0; i < kBuckets; ++i) counts_[i] += other.counts_[i];
    count_ += other.count_;
    sum_ += other.sum_;
    max_ = std::max(max_, other.max_);
  }

  void Clear() { *this = PauseHistogram(); }

  uint64_t count() const { return count_; }
  uint64_t sum() const { return sum_; }
  uint64_t max() const { return max_; }

  // The value at quantile q (0..1): the midpoint of the bucket holding the
  // ceil(q * count)-th smallest value, never above the exact maximum. 0 when empty.
  uint64_t Percentile(double q) const {
    if (count_ == 0) return 0;
    q = std::clamp(q, 0.0, 1.0);
    uint64_t rank = static_cast<uint64_t>(q * static_cast<double>(count_) + 0.999999999);
    if (rank == 0) rank = 1;
    uint64_t seen = 0;
    for (int i = 0; i < kBuckets; ++i) {
      seen += counts_[i];
      if (seen >= rank) {
        uint64_t lo = LowerBound(i), hi = i + 1 < kBuckets ? LowerBound(i + 1) : UINT64_MAX;
        uint64_t mid = lo + (hi - lo) / 2;
        return std::min(mid, max_);
      }
    }
    return max_;
  }

  static int BucketOf(uint64_t v) {
    if (v < (1u << kSubBits)) return static_cast<int>(v);
    int msb = 63 - __builtin_clzll(v);  // >= kSubBits
    int sub = static_cast<int>((v >> (msb - kSubBits)) & ((1u << kSubBits) - 1));
    return ((msb - kSubBits + 1) << kSubBits) + sub;
  }

  static uint64_t LowerBound(int bucket) {
    if (bucket < (1 << kSubBits)) return static_cast<uint64_t>(bucket);
    int msb = (bucket >> kSubBits) + kSubBits - 1;
    uint64_t sub = static_cast<uint64_t>(bucket & ((1 << kSubBits) - 1));
    return (uint64_t{1} << msb) | (sub << (msb - kSubBits));
  }

 private:
  std::array<uint64_t, kBuckets> counts_{};
  uint64_t count_ = 0, sum_ = 0, max_ = 0;
};

}  // namespace fathom
