#include "heap_census/live_strata.h"

#include <gtest/gtest.h>

namespace fathom {
namespace {

constexpr uint64_t kString = 0x1111, kArray = 0x2222;  // class ids
constexpr uint32_t kTString = 5, kTArray = 7;          // Ruby type numbers

TEST(LiveStrataTest, SizeClassesAreQuarterOctaves) {
  EXPECT_EQ(StratumOf(kString, kTString, 8192), StratumOf(kString, kTString, 10239));
  EXPECT_FALSE(StratumOf(kString, kTString, 10239) == StratumOf(kString, kTString, 10240));
  EXPECT_FALSE(StratumOf(kString, kTString, 12000) == StratumOf(kString, kTString, 10041));
  EXPECT_FALSE(StratumOf(kString, kTString, 100) == StratumOf(kArray, kTArray, 100));  // class and type count
  EXPECT_FALSE(StratumOf(kString, kTString, 100) == StratumOf(kArray, kTString, 100));
  Stratum s = StratumOf(kString, kTString, 10041);
  EXPECT_EQ(s.type(), kTString);
  EXPECT_EQ(SizeClassStart(s.size_class()), 8192u);
  EXPECT_EQ(SizeClassStart(s.size_class() + 1), 10240u);
  EXPECT_EQ(SizeClassStart(StratumOf(0, 0, 40).size_class()), 40u);
  EXPECT_EQ(SizeClassStart(StratumOf(0, 0, 1).size_class()), 1u);
  EXPECT_TRUE(s.valid());
  EXPECT_FALSE(Stratum().valid());
}

TEST(LiveStrataTest, FactorsScaleEachStratumsEstimateToItsCensus) {
  LiveStrata strata;
  Stratum big = StratumOf(kString, kTString, 10041), small = StratumOf(kString, kTString, 40);
  for (int i = 0; i < 300; i++) strata.AddCensus(big, 10041);
  for (int i = 0; i < 1000; i++) strata.AddCensus(small, 40);
  strata.AddSampled(big, 100, 100 * 10041.0);  // one live sample of weight 100: 1/3 of the truth
  strata.AddSampled(small, 500, 500 * 40.0);
  strata.AddSampled(small, 1000, 1000 * 40.0);
  LiveStrata::Factors f = strata.FactorsFor(big);
  EXPECT_DOUBLE_EQ(f.objects, 3.0);
  EXPECT_DOUBLE_EQ(f.bytes, 3.0);
  f = strata.FactorsFor(small);
  EXPECT_DOUBLE_EQ(f.objects, 1000.0 / 1500);
  EXPECT_EQ(strata.calibrated_strata(), 2u);
  EXPECT_EQ(strata.CensusClasses(), std::vector<uint64_t>{kString});
  LiveStrata::Totals all = strata.Census();
  EXPECT_EQ(all.objects, 1300u);
  EXPECT_EQ(all.bytes, 300u * 10041 + 1000u * 40);
}

TEST(LiveStrataTest, WithoutBothSidesTheEstimateIsLeftAlone) {
  LiveStrata strata;
  Stratum counted = StratumOf(kArray, kTArray, 8040), sampled = StratumOf(kArray, kTArray, 840);
  strata.AddCensus(counted, 8040);
  strata.AddSampled(sampled, 10, 8400);  // the census found none (it died, or moved class)
  EXPECT_DOUBLE_EQ(strata.FactorsFor(sampled).bytes, 1.0);
  EXPECT_DOUBLE_EQ(strata.FactorsFor(counted).bytes, 1.0);
  EXPECT_DOUBLE_EQ(strata.FactorsFor(StratumOf(kArray, kTArray, 1)).bytes, 1.0);
  auto unsampled = strata.UnsampledStrata();
  ASSERT_EQ(unsampled.size(), 1u);
  EXPECT_EQ(unsampled[0].first, counted);
  EXPECT_EQ(unsampled[0].second.objects, 1u);
  EXPECT_EQ(unsampled[0].second.bytes, 8040u);
  EXPECT_EQ(strata.Unsampled().strata, 1u);
  EXPECT_EQ(strata.calibrated_strata(), 0u);
}

}  // namespace
}  // namespace fathom
