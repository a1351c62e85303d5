#include "heap/live_sites.h"

#include <gtest/gtest.h>

#include <stdexcept>

namespace fathom {
namespace {

TEST(LiveSitesTest, MostLiveFirstTiesByNameFirstObjectsInOrder) {
  std::vector<std::string> names = {"b.rb:1", "a.rb:1", "c.rb:1", "unused"};
  //                          0  1  2  3  4  5  6  7
  std::vector<uint32_t> site_of = {2, 0, 2, 1, 0, 2, 1, 2};
  auto picks = PickLiveSites(site_of, names, 5, 3);
  ASSERT_EQ(3u, picks.size()) << "a site with no live object is no site";
  EXPECT_EQ(2u, picks[0].site);
  EXPECT_EQ(4u, picks[0].live);
  EXPECT_EQ((std::vector<uint32_t>{0, 2, 5}), picks[0].picked);
  // Two live objects each: "a.rb:1" before "b.rb:1".
  EXPECT_EQ(1u, picks[1].site);
  EXPECT_EQ((std::vector<uint32_t>{3, 6}), picks[1].picked);
  EXPECT_EQ(0u, picks[2].site);
  EXPECT_EQ((std::vector<uint32_t>{1, 4}), picks[2].picked);
}

TEST(LiveSitesTest, TopAndPerSiteBound) {
  std::vector<std::string> names = {"x", "y", "z"};
  std::vector<uint32_t> site_of = {0, 0, 0, 1, 1, 2};
  auto picks = PickLiveSites(site_of, names, 2, 1);
  ASSERT_EQ(2u, picks.size());
  EXPECT_EQ((std::vector<uint32_t>{0}), picks[0].picked);
  EXPECT_EQ(3u, picks[0].live);
  EXPECT_EQ((std::vector<uint32_t>{3}), picks[1].picked);
  EXPECT_TRUE(PickLiveSites({}, names, 5, 3).empty());
  EXPECT_TRUE(PickLiveSites(site_of, names, 0, 3).empty());
}

TEST(LiveSitesTest, ASiteWithoutANameIsAnError) {
  EXPECT_THROW(PickLiveSites({0, 3}, {"x"}, 1, 1), std::out_of_range);
}

}  // namespace
}  // namespace fathom
