// The GC pprof of the counters source, read back by go tool pprof: its
// sample types say what Ruby's counters measure (GC.stat(:time) is CPU time)
// and leave out what they do not (wall time, steps). The hooks source's
// file is tested in gc_tracker_test.cc.
#include "gc/gc_profile.h"

#include <gtest/gtest.h>

#include <string>

#include "testing/external_tools.h"

namespace fathom {
namespace {

constexpr int64_t kMs = 1000 * 1000;

// Two reads: 3 minors (8 ms), then 2 minors and the major of a GC.start,
// latest (7 ms).
GcProfileData CountersData() {
  GcProfileData d;
  d.source = GcSource::kCounters;
  d.poll_interval_ns = 10 * kMs;
  d.flush_interval_ns = 10 * kMs;
  d.start_realtime_ns = 1700000000000000000;
  d.start_monotonic_ns = 0;
  d.end_monotonic_ns = 2000 * kMs;
  GcPeriod minors;
  minors.type = GcType::kMinor;
  minors.cause = GcCause::kNewobj;
  minors.cpu_ns = 8 * kMs;
  minors.minor_gcs = 3;
  minors.cycles_started = 3;
  GcPeriod mixed;
  mixed.type = GcType::kMajor;
  mixed.reason = GcReason::kForce;
  mixed.cause = GcCause::kMethod;
  mixed.cpu_ns = 7 * kMs;
  mixed.minor_gcs = 2;
  mixed.major_gcs = 1;
  mixed.cycles_started = 3;
  d.periods = {minors, mixed};
  return d;
}

struct GoPprof {
  test_util::TempDir dir;
  std::string path = dir.file("gc.pb.gz");

  explicit GoPprof(const std::string& bytes) { test_util::WriteFile(path, bytes); }

  test_util::CommandResult Run(const std::string& flags) {
    std::string env = "HOME=" + dir.path() + " GOCACHE=" + dir.path() + "/cache ";
    return test_util::RunCommand(env + "go tool pprof " + flags + " " + test_util::ShellQuote(path));
  }
};

TEST(GcCountersPprofTest, SampleTypesAreCpuAndGcsOnly) {
  FATHOM_REQUIRE_TOOL("go");
  GoPprof go(EncodeGcPprof(CountersData()));
  auto raw = go.Run("-raw -symbolize=none");
  ASSERT_EQ(raw.exit_code, 0) << raw.output;
  const std::string& out = raw.output;
  EXPECT_NE(out.find("PeriodType: cpu nanoseconds"), std::string::npos) << out;
  EXPECT_NE(out.find("Samples:\ncpu/nanoseconds[dflt] gcs/count\n"), std::string::npos) << out;
  EXPECT_EQ(out.find("wall"), std::string::npos) << out;
  EXPECT_EQ(out.find("gc_steps"), std::string::npos) << out;
  EXPECT_EQ(out.find("fathom.gc.pauses"), std::string::npos) << out;
  EXPECT_NE(out.find("fathom.gc.source=counters poll_ns=10000000"), std::string::npos) << out;
  // The latest GC's type gets the read's time and labels; the other type's
  // GCs of that read are counted with no time and the cause "unseen".
  EXPECT_NE(out.find("    8000000          3: 1 \n                gc cause:[newobj] gc type:[minor] thread:[GC]"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("    7000000          1: 1 \n                gc cause:[method] gc reason:[force] gc type:[major]"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("          0          2: 1 \n                gc cause:[unseen] gc type:[minor] thread:[GC]"),
            std::string::npos)
      << out;
}

TEST(GcCountersPprofTest, TopShowsCpuTimeByDefault) {
  FATHOM_REQUIRE_TOOL("go");
  GoPprof go(EncodeGcPprof(CountersData()));
  auto top = go.Run("-top");
  ASSERT_EQ(top.exit_code, 0) << top.output;
  EXPECT_NE(top.output.find("Type: cpu"), std::string::npos) << top.output;
  EXPECT_NE(top.output.find("Total samples = 15ms"), std::string::npos) << top.output;
  EXPECT_NE(top.output.find("15ms   100%   100%       15ms   100%  Garbage Collection"), std::string::npos)
      << top.output;
  auto gcs = go.Run("-top -sample_index=gcs");
  ASSERT_EQ(gcs.exit_code, 0) << gcs.output;
  EXPECT_NE(gcs.output.find("Type: gcs"), std::string::npos) << gcs.output;
  EXPECT_NE(gcs.output.find("6   100%   100%          6   100%  Garbage Collection"), std::string::npos)
      << gcs.output;
}

// A read whose latest type's counter did not move (should not happen) still
// keeps its time, on a sample of that type with no GCs.
TEST(GcCountersPprofTest, TimeIsKeptWhenTheLatestTypeHasNoCount) {
  FATHOM_REQUIRE_TOOL("go");
  GcProfileData d = CountersData();
  d.periods.resize(1);
  d.periods[0].type = GcType::kMajor;
  GoPprof go(EncodeGcPprof(d));
  auto raw = go.Run("-raw -symbolize=none");
  ASSERT_EQ(raw.exit_code, 0) << raw.output;
  EXPECT_NE(raw.output.find("    8000000          0: 1 \n                gc cause:[newobj] gc type:[major]"),
            std::string::npos)
      << raw.output;
  EXPECT_NE(raw.output.find("          0          3: 1 \n                gc cause:[unseen] gc type:[minor]"),
            std::string::npos)
      << raw.output;
}

}  // namespace
}  // namespace fathom
