#include "heap_census/census_pages.h"

#include <gtest/gtest.h>

namespace fathom {
namespace {

TEST(CensusPagesTest, PagesWalkedInSlicesKeepTheirSlicesStamp) {
  CensusPages p;
  // Slice 1 (stamp 100) walks two pages out of address order, slice 2
  // (stamp 200) a third: Ruby 3.2+ visits pages in list order.
  p.Add(0x30000, 0x30000 + 400, 100);
  p.Add(0x10000, 0x10000 + 400, 100);
  EXPECT_TRUE(p.Walked(0x30000));
  EXPECT_FALSE(p.Walked(0x20000));
  p.Add(0x20000, 0x20000 + 800, 200);
  p.Finish();
  EXPECT_EQ(p.pages(), 3u);
  int64_t stamp = 0;
  ASSERT_TRUE(p.StampAt(0x10000, &stamp));
  EXPECT_EQ(stamp, 100);
  ASSERT_TRUE(p.StampAt(0x20000 + 799, &stamp));
  EXPECT_EQ(stamp, 200);
  ASSERT_TRUE(p.StampAt(0x30000 + 40, &stamp));
  EXPECT_EQ(stamp, 100);
}

TEST(CensusPagesTest, AddressesOnNoWalkedPageHaveNoStamp) {
  CensusPages p;
  p.Add(0x10000, 0x10000 + 400, 5);
  int64_t stamp = 0;
  EXPECT_FALSE(p.StampAt(0x10000, &stamp));  // not finished: nothing is certain
  p.Finish();
  EXPECT_FALSE(p.StampAt(0x8000, &stamp));          // below every page
  EXPECT_FALSE(p.StampAt(0x10000 + 400, &stamp));   // just past it: a page added after the census
  EXPECT_TRUE(p.StampAt(0x10000 + 399, &stamp));
}

TEST(CensusPagesTest, APageSeenTwiceKeepsItsFirstStamp) {
  // A slice skips walked pages; should one be added again, the census
  // counted it when it was first walked.
  CensusPages p;
  p.Add(0x10000, 0x10000 + 400, 1);
  p.Add(0x10000, 0x10000 + 400, 2);
  p.Finish();
  EXPECT_EQ(p.pages(), 1u);
  int64_t stamp = 0;
  ASSERT_TRUE(p.StampAt(0x10000 + 40, &stamp));
  EXPECT_EQ(stamp, 1);
}

TEST(CensusPagesTest, OnlyPagesExpectedAtTheStartAreCensusPages) {
  CensusPages p;
  p.Expect(0x10000);
  p.Expect(0x20000);
  EXPECT_EQ(p.expected(), 2u);
  EXPECT_TRUE(p.Expected(0x20000));
  EXPECT_FALSE(p.Expected(0x30000));  // added by Ruby after the census began
}

TEST(CensusPagesTest, ClearForgetsEverything) {
  CensusPages p;
  p.Expect(0x10000);
  p.Add(0x10000, 0x10000 + 400, 1);
  p.Finish();
  p.Clear();
  EXPECT_FALSE(p.Walked(0x10000));
  EXPECT_FALSE(p.Expected(0x10000));
  int64_t stamp = 0;
  EXPECT_FALSE(p.StampAt(0x10000, &stamp));
}

TEST(SliceBudgetTest, ExpiresAtItsDeadlineOrNeverWithoutOne) {
  SliceBudget b(1000, 500);
  EXPECT_FALSE(b.Expired(1499));
  EXPECT_TRUE(b.Expired(1500));
  SliceBudget unlimited(1000, 0);
  EXPECT_FALSE(unlimited.Expired(INT64_MAX - 1));
}

}  // namespace
}  // namespace fathom
