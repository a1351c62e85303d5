#include "encode/output_stamp.h"

#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "encode/pprof_builder.h"
#include "testing/external_tools.h"

namespace fathom {
namespace {

using test_util::RunCommand;
using test_util::ShellQuote;
using test_util::TempDir;

TEST(OutputStampTest, IsoUtcMillis) {
  EXPECT_EQ(IsoUtcMillis(0), "1970-01-01T00:00:00.000Z");
  EXPECT_EQ(IsoUtcMillis(1764169200123456789LL), "2025-11-26T15:00:00.123Z");
  // Before the epoch: floor, not truncation toward zero.
  EXPECT_EQ(IsoUtcMillis(-1), "1969-12-31T23:59:59.999Z");
}

PprofBuilder SmallProfile() {
  PprofBuilder b({{"alloc_space", "bytes"}, {"inuse_space", "bytes"}}, {"space", "bytes"}, 1);
  b.set_default_sample_type("inuse_space");
  b.set_time(1764169200000000000LL, 2000000000LL);
  b.add_comment("own comment");
  b.add_sample({b.intern_location(b.intern_function("<main>", "app.rb", 1), 3)}, {10, 5}, {});
  return b;
}

// Read back by go tool pprof, the reader users have: the stamp's lines come
// after the profile's own, the window from the profile's time fields.
TEST(OutputStampTest, GoPprofListsTheStampAfterTheProfilesComments) {
  PprofBuilder b = SmallProfile();
  OutputStamp stamp;
  stamp.comments = {"pid=42", "hostname=web-1"};
  stamp.window = true;
  stamp.default_sample_type = "alloc_space";
  ApplyOutputStamp(stamp, b);

  TempDir dir;
  std::string file = dir.file("p.pb.gz");
  test_util::WriteFile(file, b.EncodeGzipped());
  std::string env = "HOME=" + ShellQuote(dir.path()) + " GOCACHE=" + ShellQuote(dir.file("gocache")) +
                    " GOPATH=" + ShellQuote(dir.file("gopath")) + " PPROF_TMPDIR=" + ShellQuote(dir.path());
  test_util::CommandResult comments = RunCommand("env " + env + " go tool pprof -comments " + ShellQuote(file));
  ASSERT_EQ(comments.exit_code, 0) << comments.output;
  EXPECT_NE(comments.output.find("own comment\npid=42\nhostname=web-1\n"
                                 "window=2025-11-26T15:00:00.000Z/2025-11-26T15:00:02.000Z"),
            std::string::npos)
      << comments.output;
  // The default sample type is what -top shows without -sample_index.
  test_util::CommandResult top = RunCommand("env " + env + " go tool pprof -top -symbolize=none " + ShellQuote(file));
  ASSERT_EQ(top.exit_code, 0) << top.output;
  EXPECT_NE(top.output.find("Type: alloc_space"), std::string::npos) << top.output;
}

TEST(OutputStampTest, NoWindowWithoutATimeAndNoChangeWhenEmpty) {
  PprofBuilder b({{"wall", "nanoseconds"}}, {"wall", "nanoseconds"}, 1);
  b.set_default_sample_type("wall");
  OutputStamp stamp;
  stamp.window = true;
  std::string before = b.Encode();
  ApplyOutputStamp(stamp, b);
  EXPECT_EQ(b.Encode(), before);  // time unset: no window line, nothing else asked
}

TEST(OutputStampTest, UnknownDefaultSampleTypeThrows) {
  PprofBuilder b = SmallProfile();
  OutputStamp stamp;
  stamp.default_sample_type = "cpu";
  EXPECT_THROW(ApplyOutputStamp(stamp, b), std::invalid_argument);
}

}  // namespace
}  // namespace fathom
