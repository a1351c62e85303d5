// StepCpuSampler: the stride, the hot window after a descheduled step, the
// estimate of unmeasured steps, and a measured step's uncovered head.
#include "gc/step_cpu_sampler.h"

#include <gtest/gtest.h>

namespace fathom {
namespace {

constexpr int64_t kUs = 1000;

// What GcTracker does at GC_ENTER: asks, then begins the step.
bool Begin(StepCpuSampler& s, bool candidate) {
  bool want = s.WantsCpu(candidate);
  s.BeginStep(candidate);
  return want;
}

TEST(StepCpuSamplerTest, MeasuresOneCandidateInStrideAndEveryOtherStep) {
  StepCpuSampler s(StepCpuSampler::Config{4, 100});
  int measured = 0;
  for (int i = 0; i < 40; i++) measured += Begin(s, true);
  EXPECT_EQ(measured, 10);
  for (int i = 0; i < 5; i++) EXPECT_TRUE(Begin(s, false)) << "a major GC's step";
  // Non-candidates do not move the stride: candidate 40 is measured.
  EXPECT_TRUE(Begin(s, true));
  EXPECT_FALSE(Begin(s, true));

  StepCpuSampler all(StepCpuSampler::Config{1, 100});
  for (int i = 0; i < 10; i++) EXPECT_TRUE(Begin(all, true));
}

TEST(StepCpuSamplerTest, EstimateIsTheWallTimeUntilAStepLikeItWasMeasured) {
  StepCpuSampler s(StepCpuSampler::Config{8, 100});
  EXPECT_EQ(s.Estimate(30 * kUs), 30 * kUs);
  // A cycle's first step (not typical) teaches nothing.
  EXPECT_EQ(s.Measured(1000 * kUs, 1000 * kUs, 500 * kUs, false), 500 * kUs);
  EXPECT_EQ(s.Estimate(30 * kUs), 30 * kUs);
  EXPECT_EQ(s.Measured(20 * kUs, 20 * kUs, 18 * kUs, true), 18 * kUs);
  EXPECT_EQ(s.Estimate(30 * kUs), 27 * kUs);
  EXPECT_EQ(s.Estimate(-5), 0);
}

TEST(StepCpuSamplerTest, MeasuredCpuIsClampedToTheWallTime) {
  StepCpuSampler s(StepCpuSampler::Config{8, 100});
  // Clock skew or a bad read: never more CPU than wall, never negative.
  EXPECT_EQ(s.Measured(10 * kUs, 10 * kUs, 11 * kUs, true), 10 * kUs);
  EXPECT_EQ(s.Measured(10 * kUs, 10 * kUs, -3, true), 0);
  EXPECT_EQ(s.Measured(10 * kUs, 12 * kUs, 5 * kUs, true), 5 * kUs);
}

// Read at GC_START: the head of the step before it ran at the measured
// part's ratio.
TEST(StepCpuSamplerTest, AnUncoveredHeadIsChargedAtTheStepsOwnRatio) {
  StepCpuSampler s(StepCpuSampler::Config{8, 100});
  EXPECT_EQ(s.Measured(1010 * kUs, 1000 * kUs, 800 * kUs, false), 808 * kUs);
  EXPECT_EQ(s.Measured(10 * kUs, 0, 0, false), 0) << "nothing measured: no ratio to apply";
}

TEST(StepCpuSamplerTest, ADescheduledStepArmsTheHotWindowAndEachOneReArmsIt) {
  StepCpuSampler s(StepCpuSampler::Config{8, 10});
  ASSERT_TRUE(Begin(s, true));  // candidate 0
  // Lost 1,970 us of 2 ms: descheduled.
  s.Measured(2000 * kUs, 2000 * kUs, 30 * kUs, true);
  EXPECT_TRUE(s.hot());
  EXPECT_EQ(s.descheduled_steps(), 1u);
  for (int i = 0; i < 10; i++) EXPECT_TRUE(Begin(s, true)) << i;
  EXPECT_FALSE(s.hot());
  // Candidates 11..15 are not on the stride (the next is 16).
  EXPECT_FALSE(Begin(s, true));
  // Off the CPU for 99 us of 150: under kLostMinNs, not descheduled. Off
  // for 150 us of 400: less than half, not descheduled either.
  s.Measured(150 * kUs, 150 * kUs, 51 * kUs, true);
  s.Measured(400 * kUs, 400 * kUs, 250 * kUs, true);
  EXPECT_FALSE(s.hot());
  // A cycle's own step counts too (GC.start under load is the usual one).
  s.Measured(40000 * kUs, 40000 * kUs, 15000 * kUs, false);
  EXPECT_TRUE(s.hot());
  EXPECT_EQ(s.descheduled_steps(), 2u);
}

// The ratio follows the recent steps: after a hot window of the default
// size, a descheduled step no longer weighs on the estimate of the steps
// the stride leaves unmeasured.
TEST(StepCpuSamplerTest, TheRatioForgetsOldSteps) {
  StepCpuSampler s(StepCpuSampler::Config{});
  Begin(s, true);
  s.Measured(4000 * kUs, 4000 * kUs, 40 * kUs, true);
  EXPECT_LT(s.Estimate(40 * kUs), 1 * kUs);
  while (s.hot()) {
    Begin(s, true);
    s.Measured(40 * kUs, 40 * kUs, 38 * kUs, true);
  }
  EXPECT_NEAR(static_cast<double>(s.Estimate(40 * kUs)), 38.0 * kUs, 0.01 * 38 * kUs);
}

TEST(StepCpuSamplerTest, ResetForgetsEverything) {
  StepCpuSampler s(StepCpuSampler::Config{8, 10});
  Begin(s, true);
  s.Measured(2000 * kUs, 2000 * kUs, 30 * kUs, true);
  s.Reset();
  EXPECT_FALSE(s.hot());
  EXPECT_EQ(s.descheduled_steps(), 0u);
  EXPECT_EQ(s.Estimate(30 * kUs), 30 * kUs);
  EXPECT_TRUE(Begin(s, true)) << "the stride starts over";
}

}  // namespace
}  // namespace fathom
