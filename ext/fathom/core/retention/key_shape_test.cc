#include "retention/key_shape.h"

#include <gtest/gtest.h>

#include <string>

namespace fathom {
namespace retention {
namespace {

// Pinned: a shaped name must not change between versions or processes, or
// `fathom diff` of two snapshots would see every keyed frame as new.
TEST(KeyShapeTest, HashIsFnv1aFoldedAndPinned) {
  EXPECT_EQ(KeyHash16(""), 0x1cd9);  // 0x811c9dc5 folded
  EXPECT_EQ(KeyHash16("a"), 0xcd20);
  EXPECT_EQ(KeyHash16("sk_live_4eC39HqLyjWDarjtT1zdp7dc"), 0x8bcd);
  EXPECT_EQ(KeyHash16(std::string("a\0b", 3)), KeyHash16(std::string("a\0b", 3)));
  EXPECT_NE(KeyHash16(std::string("a\0b", 3)), KeyHash16("a"));
}

TEST(KeyShapeTest, ShowsLengthAndHashOnly) {
  EXPECT_EQ(KeyShape("sk_live_4eC39HqLyjWDarjtT1zdp7dc"), "\"…\" 32 bytes #8bcd");
  EXPECT_EQ(KeyShape("alice@example.com:s3cr3t-pw"), "\"…\" 27 bytes #f177");
  EXPECT_EQ(KeyShape("a"), "\"…\" 1 byte #cd20");
  EXPECT_EQ(KeyShape("user_id", true), ":… 7 bytes #4c7d");
  std::string big(100000, '\xff');
  EXPECT_EQ(KeyShape(big).find('\xff'), std::string::npos);
  EXPECT_NE(KeyShape(big).find("100000 bytes"), std::string::npos);
}

}  // namespace
}  // namespace retention
}  // namespace fathom
