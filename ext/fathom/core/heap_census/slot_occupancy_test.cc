#include "heap_census/slot_occupancy.h"

#include <gtest/gtest.h>

namespace fathom {
namespace {

TEST(SlotOccupancyTest, FreeAndOccupiedSlotsOfPagesGivenOutOfOrder) {
  SlotOccupancy s;
  size_t high = s.AddPage(0x20000, 0x20000 + 40 * 10, 40);  // Ruby 3.1's 40-byte slots
  size_t low = s.AddPage(0x10000, 0x10000 + 80 * 10, 80);   // a wider size pool (3.2+)
  s.MarkOccupied(high, 0x20000 + 40 * 3);
  s.MarkOccupied(low, 0x10000);
  s.MarkOccupied(low, 0x10000);  // twice: counted once
  s.Finish();
  EXPECT_EQ(s.pages(), 2u);
  EXPECT_EQ(s.slots(), 20u);
  EXPECT_EQ(s.occupied(), 2u);
  EXPECT_TRUE(s.WasOccupied(0x20000 + 40 * 3));
  EXPECT_FALSE(s.WasOccupied(0x20000 + 40 * 4));
  EXPECT_TRUE(s.WasOccupied(0x10000));
  EXPECT_FALSE(s.WasOccupied(0x10000 + 80 * 9));
}

TEST(SlotOccupancyTest, AddressesOnNoPageOfTheStartWereFree) {
  SlotOccupancy s;
  size_t p = s.AddPage(0x10000, 0x10000 + 400, 40);
  for (uint64_t a = 0x10000; a < 0x10000 + 400; a += 40) s.MarkOccupied(p, a);
  s.Finish();
  EXPECT_FALSE(s.WasOccupied(0x8000));           // below every page
  EXPECT_FALSE(s.WasOccupied(0x10000 + 400));    // just past the page: a page added later
  EXPECT_FALSE(s.WasOccupied(0x90000));
  EXPECT_TRUE(s.WasOccupied(0x10000 + 360));
}

TEST(SlotOccupancyTest, WhatCannotBeToldIsOccupiedNeverFree) {
  SlotOccupancy s;
  size_t p = s.AddPage(0x10000, 0x10000 + 400, 40);
  EXPECT_TRUE(s.WasOccupied(0x10000));  // not finished: nothing is certain
  s.MarkOccupied(p, 0x10000 + 4000);    // off its page: ignored
  s.Finish();
  EXPECT_EQ(s.occupied(), 0u);
  EXPECT_FALSE(s.WasOccupied(0x10000 + 40));
  EXPECT_TRUE(s.WasOccupied(0x10000 + 41));  // not a slot boundary
}

TEST(SlotOccupancyTest, ClearForgetsEverything) {
  SlotOccupancy s;
  size_t p = s.AddPage(0x10000, 0x10000 + 400, 40);
  s.MarkOccupied(p, 0x10000);
  s.Finish();
  s.Clear();
  EXPECT_TRUE(s.empty());
  EXPECT_EQ(s.occupied(), 0u);
  EXPECT_FALSE(s.WasOccupied(0x10000));
}

TEST(SlotOccupancyTest, ASlotSeenFreeLaterHoldsOnlyNewObjects) {
  SlotOccupancy s;
  size_t p = s.AddPage(0x10000, 0x10000 + 400, 40);
  s.MarkOccupied(p, 0x10000);
  s.MarkOccupied(p, 0x10000 + 40);
  s.Finish();
  s.MarkFree(0x10000 + 40);  // its occupant died: a later walk saw the slot free
  s.MarkFree(0x10000 + 40);
  s.MarkFree(0x90000);       // on no page: nothing to do
  s.MarkFree(0x10000 + 41);  // not a slot
  EXPECT_TRUE(s.WasOccupied(0x10000));
  EXPECT_FALSE(s.WasOccupied(0x10000 + 40));
  EXPECT_EQ(s.occupied(), 1u);
}

TEST(SlotOccupancyTest, PagesAreFoundOnlyWhenTheyAreTheSamePage) {
  SlotOccupancy s;
  size_t p = s.AddPage(0x10000, 0x10000 + 400, 40);
  s.MarkOccupied(p, 0x10000 + 80);
  s.Finish();
  size_t page = s.FindPage(0x10000, 0x10000 + 400, 40);
  ASSERT_NE(page, SlotOccupancy::kNoPage);
  EXPECT_TRUE(s.SlotWasOccupied(page, 2));
  EXPECT_FALSE(s.SlotWasOccupied(page, 1));
  EXPECT_EQ(s.FindPage(0x10000, 0x10000 + 400, 80), SlotOccupancy::kNoPage);  // another slot size now
  EXPECT_EQ(s.FindPage(0x20000, 0x20000 + 400, 40), SlotOccupancy::kNoPage);  // a page added since
  s.MarkSlotFree(page, 2);
  s.MarkSlotFree(page, 2);
  EXPECT_FALSE(s.WasOccupied(0x10000 + 80));
  EXPECT_EQ(s.occupied(), 0u);
}

}  // namespace
}  // namespace fathom
