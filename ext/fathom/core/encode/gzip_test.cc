#include "encode/gzip.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <random>
#include <stdexcept>
#include <string>

#include "testing/external_tools.h"
#include "testing/gunzip.h"

namespace fathom {
namespace {

std::string RandomBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::string s(n, '\0');
  for (char& c : s) c = static_cast<char>(rng());
  return s;
}

TEST(GzipTest, RoundTripsEmptyInput) {
  std::string gz = GzipCompress("");
  ASSERT_GE(gz.size(), 18u);  // 10-byte header + empty deflate block + 8-byte trailer
  EXPECT_EQ(GzipDecompress(gz), "");
}

TEST(GzipTest, WritesGzipFraming) {
  std::string gz = GzipCompress("hello, fathom");
  ASSERT_GE(gz.size(), 10u);
  EXPECT_EQ(static_cast<unsigned char>(gz[0]), 0x1f);
  EXPECT_EQ(static_cast<unsigned char>(gz[1]), 0x8b);
  EXPECT_EQ(gz[2], 8);  // deflate
  EXPECT_EQ(GzipDecompress(gz), "hello, fathom");
}

// The header's FCOMMENT says Fathom wrote the file (lib/fathom/files/atomic_file.rb
// overwrites only files that carry it, unless told to).
TEST(GzipTest, HeaderCarriesFathomsComment) {
  std::string gz = GzipCompress("x");
  ASSERT_GE(gz.size(), 17u);
  EXPECT_EQ(gz[3], 0x10);  // FLG: FCOMMENT only
  EXPECT_EQ(static_cast<unsigned char>(gz[9]), 3);  // OS: Unix
  EXPECT_EQ(std::string(gz.data() + 10), kGzipComment);  // zero-terminated after the 10-byte header
}

TEST(GzipTest, RoundTripsLargeInputAtEveryLevel) {
  // Compressible and incompressible halves: output may exceed the input.
  std::string data = RandomBytes(3 << 20, 1);
  for (size_t i = 0; i < data.size() / 2; i++) data[i] = static_cast<char>("profile"[i % 7]);
  for (int level : {-1, 0, 1, 6, 9}) {
    SCOPED_TRACE(level);
    std::string gz = GzipCompress(data, level);
    if (level != 0) {
      EXPECT_LT(gz.size(), data.size());
    }
    EXPECT_EQ(GzipDecompress(gz), data);
  }
}

TEST(GzipTest, HighlyCompressibleInputGrowsTheOutputBuffer) {
  std::string data(50 << 20, 'a');  // ~1000x ratio
  std::string gz = GzipCompress(data, 9);
  EXPECT_LT(gz.size(), 200u << 10);
  EXPECT_EQ(GzipDecompress(gz), data);
}

TEST(GzipTest, AcceptsZlibAndConcatenatedGzip) {
  // A zlib stream (header 78 9c) for "abc", made by zlib.compress(b"abc").
  const unsigned char zlib_abc[] = {0x78, 0x9c, 0x4b, 0x4c, 0x4a, 0x06, 0x00, 0x02, 0x4d, 0x01, 0x27};
  EXPECT_EQ(GzipDecompress(std::string(reinterpret_cast<const char*>(zlib_abc), sizeof zlib_abc)), "abc");
  EXPECT_EQ(GzipDecompress(GzipCompress("first,") + GzipCompress("second")), "first,second");
}

TEST(GzipTest, RejectsCorruptInput) {
  std::string gz = GzipCompress(RandomBytes(10000, 2) + std::string(10000, 'x'));
  EXPECT_THROW(GzipDecompress(""), std::runtime_error);
  EXPECT_THROW(GzipDecompress("not gzip at all"), std::runtime_error);
  EXPECT_THROW(GzipDecompress(gz.substr(0, gz.size() / 2)), std::runtime_error);  // truncated
  EXPECT_THROW(GzipDecompress(gz.substr(0, gz.size() - 1)), std::runtime_error);  // trailer cut
  std::string flipped = gz;
  flipped[gz.size() - 6] ^= 0x01;  // CRC-32 no longer matches
  EXPECT_THROW(GzipDecompress(flipped), std::runtime_error);
  std::string garbage = gz;
  for (size_t i = 10; i < 60; i++) garbage[i] = static_cast<char>(0xff);
  EXPECT_THROW(GzipDecompress(garbage), std::runtime_error);
  EXPECT_THROW(GzipDecompress(gz + "trailing junk"), std::runtime_error);
}

TEST(GzipTest, RejectsBadLevel) { EXPECT_THROW(GzipCompress("x", 42), std::runtime_error); }

TEST(GzipTest, ReadableByTheGzipTool) {
  FATHOM_REQUIRE_TOOL("gzip");
  test_util::TempDir dir;
  std::string data = RandomBytes(100000, 3) + std::string(100000, 'z');
  test_util::WriteFile(dir.file("data.gz"), GzipCompress(data));
  test_util::CommandResult r =
      test_util::RunCommand("gzip -t " + test_util::ShellQuote(dir.file("data.gz")) + " && gzip -dc " +
                            test_util::ShellQuote(dir.file("data.gz")) + " | cksum");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  test_util::WriteFile(dir.file("data"), data);
  test_util::CommandResult want = test_util::RunCommand("cksum < " + test_util::ShellQuote(dir.file("data")));
  EXPECT_EQ(r.output, want.output);
}

}  // namespace
}  // namespace fathom
