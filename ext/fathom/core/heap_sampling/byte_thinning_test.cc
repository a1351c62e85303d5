#include "heap_sampling/byte_thinning.h"

#include <gtest/gtest.h>

#include <random>

namespace fathom {
namespace {

TEST(ByteThinningTest, KeepsBigObjectsAlwaysAndSmallOnesInProportionToBytes) {
  ByteThinning t(0.25, 1000, 1000, 1000);  // min = max: a fixed threshold
  EXPECT_DOUBLE_EQ(t.KeepProbability(40), 0.04);
  EXPECT_DOUBLE_EQ(t.KeepProbability(500), 0.5);
  EXPECT_DOUBLE_EQ(t.KeepProbability(1000), 1.0);
  EXPECT_DOUBLE_EQ(t.KeepProbability(10000), 1.0);
  EXPECT_GT(t.KeepProbability(0), 0.0);  // a finite weight even for a size of 0
}

TEST(ByteThinningTest, ScaledWeightIsUnbiasedAndInteger) {
  EXPECT_EQ(ByteThinning::ScaledWeight(7, 1.0, 0.99), 7u);
  // 10 / 0.3 = 33.33...: 34 when u < 1/3, else 33.
  EXPECT_EQ(ByteThinning::ScaledWeight(10, 0.3, 0.2), 34u);
  EXPECT_EQ(ByteThinning::ScaledWeight(10, 0.3, 0.5), 33u);
  std::mt19937_64 rng(1);
  std::uniform_real_distribution<double> u(0, 1);
  double sum = 0;
  const int n = 200000;
  for (int i = 0; i < n; i++) sum += static_cast<double>(ByteThinning::ScaledWeight(10, 0.3, u(rng)));
  EXPECT_NEAR(sum / n, 10 / 0.3, 0.01);
}

// The whole estimator: thinning a stream of candidates of mixed sizes keeps
// sum(weight) and sum(weight * bytes) unbiased, and the threshold settles
// where the mean keep probability is the target.
TEST(ByteThinningTest, ThinnedTotalsAreUnbiasedAndTheThresholdFindsTheBudget) {
  ByteThinning t(0.25, 16, 1 << 20, 4096);
  std::mt19937_64 rng(7);
  std::uniform_real_distribution<double> u(0, 1);
  const uint64_t sizes[] = {40, 40, 40, 40, 40, 40, 200, 200, 1000, 10040};
  double count = 0, bytes = 0, kept = 0, true_count = 0, true_bytes = 0;
  const int n = 400000;
  for (int i = 0; i < n; i++) {
    uint64_t size = sizes[i % 10];
    true_count += 3;
    true_bytes += 3.0 * static_cast<double>(size);
    double p = t.KeepProbability(size);
    if (u(rng) >= p) continue;
    uint64_t w = ByteThinning::ScaledWeight(3, p, u(rng));
    kept++;
    count += static_cast<double>(w);
    bytes += static_cast<double>(w) * static_cast<double>(size);
  }
  EXPECT_NEAR(kept / n, 0.25, 0.01);
  EXPECT_NEAR(count / true_count, 1.0, 0.02);
  EXPECT_NEAR(bytes / true_bytes, 1.0, 0.01);
  EXPECT_GT(t.threshold(), 40);
  EXPECT_LT(t.threshold(), 10040);
}

TEST(ByteThinningTest, ThresholdStaysWithinItsBounds) {
  ByteThinning t(0.25, 64, 4096, 1024);
  for (int i = 0; i < 10000; i++) t.KeepProbability(1 << 20);  // all huge: would climb forever
  EXPECT_DOUBLE_EQ(t.threshold(), 4096);
  for (int i = 0; i < 10000; i++) t.KeepProbability(8);  // all tiny
  EXPECT_DOUBLE_EQ(t.threshold(), 64);
}

}  // namespace
}  // namespace fathom
