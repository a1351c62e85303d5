#include "base/utf8.h"

#include <gtest/gtest.h>

namespace fathom {
namespace {

const std::string R = "\xEF\xBF\xBD";  // U+FFFD

TEST(Utf8Test, WellFormedInputIsValidAndUnchanged) {
  for (std::string s : {"", "Object#foo", "caf\xC3\xA9", "\xE2\x86\x92", "\xF0\x9F\x98\x80", "\xF4\x8F\xBF\xBF"}) {
    EXPECT_TRUE(IsValidUtf8(s)) << s;
    EXPECT_EQ(ScrubUtf8(s), s);
    EXPECT_EQ(EscapeInvalidUtf8(s), s);
  }
}

TEST(Utf8Test, IllFormedSubpartsAreReplacedOnceEach) {
  EXPECT_FALSE(IsValidUtf8("\xFF"));
  EXPECT_EQ(ScrubUtf8("a\xFF" "b"), "a" + R + "b");
  EXPECT_EQ(ScrubUtf8("\xC0\xAF"), R + R);              // overlong lead, then a lone continuation
  EXPECT_EQ(ScrubUtf8("\xE2\x86"), R);                  // truncated: one maximal subpart
  EXPECT_EQ(ScrubUtf8("\xE2\x86" "A"), R + "A");        // the bad byte is read afresh
  EXPECT_EQ(ScrubUtf8("\xED\xA0\x80"), R + R + R);      // surrogate U+D800
  EXPECT_EQ(ScrubUtf8("\xF4\x90\x80\x80"), R + R + R + R);  // past U+10FFFF
  EXPECT_EQ(ScrubUtf8("\xE2\xC3\xA9"), R + "\xC3\xA9");
}

TEST(Utf8Test, EscapingKeepsTheBytesReadable) {
  EXPECT_EQ(EscapeInvalidUtf8("key\xFF\xFE"), "key\\xFF\\xFE");
  EXPECT_EQ(EscapeInvalidUtf8("\xE2\x86" "A\xC3\xA9"), "\\xE2\\x86A\xC3\xA9");
  EXPECT_TRUE(IsValidUtf8(EscapeInvalidUtf8("\x80\x81\xC0\xF5")));
}

// Every byte string the scrubber produces is valid, whatever went in.
TEST(Utf8Test, ScrubbedOutputIsAlwaysValid) {
  std::string s;
  for (int i = 0; i < 4096; i++) s += static_cast<char>((i * 7919 + i / 3) & 0xFF);
  EXPECT_FALSE(IsValidUtf8(s));
  EXPECT_TRUE(IsValidUtf8(ScrubUtf8(s)));
  EXPECT_TRUE(IsValidUtf8(EscapeInvalidUtf8(s)));
}

}  // namespace
}  // namespace fathom
