// The GC track of the Firefox file: the hooks source's "GC" markers, and the
// counters source's "GCPoll" markers, one per read, holding only what Ruby's
// counters tell (no wall time, no steps, no made-up cause).
#include "gc/firefox_gc_track.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "firefox/firefox_profile.h"
#include "testing/firefox_format_check.h"
#include "testing/mini_json.h"

namespace fathom {
namespace {

using test_util::json::Value;

constexpr int64_t kMs = 1000 * 1000;

GcProfileData Base(GcSource source) {
  GcProfileData d;
  d.source = source;
  d.pid = 42;
  d.flush_interval_ns = 10 * kMs;
  d.poll_interval_ns = source == GcSource::kCounters ? 10 * kMs : 0;
  d.start_realtime_ns = 1700000000000000000;
  d.start_monotonic_ns = 1000 * kMs;
  d.end_monotonic_ns = 2000 * kMs;
  return d;
}

// What GcCounterPoll makes: 3 minors in one read, a GC.start's major after
// two minors in the next, a lone major (reason/cause not given) in a third.
GcProfileData Counters() {
  GcProfileData d = Base(GcSource::kCounters);
  GcPeriod minors;
  minors.start_ns = 1092 * kMs;
  minors.end_ns = 1100 * kMs;
  minors.cpu_ns = 8 * kMs;
  minors.type = GcType::kMinor;
  minors.cause = GcCause::kNewobj;
  minors.minor_gcs = 3;
  minors.cycles_started = 3;
  GcPeriod mixed = minors;
  mixed.start_ns = 1203 * kMs;
  mixed.end_ns = 1210 * kMs;
  mixed.cpu_ns = 7 * kMs;
  mixed.type = GcType::kMajor;
  mixed.reason = GcReason::kForce;
  mixed.cause = GcCause::kMethod;
  mixed.minor_gcs = 2;
  mixed.major_gcs = 1;
  GcPeriod bare = mixed;
  bare.start_ns = 1300 * kMs;
  bare.end_ns = 1300 * kMs;
  bare.cpu_ns = 0;
  bare.reason = GcReason::kNone;
  bare.cause = GcCause::kUnknown;
  bare.minor_gcs = 0;
  bare.major_gcs = 1;
  bare.cycles_started = 1;
  d.periods = {minors, mixed, bare};
  return d;
}

const Value& GcTrack(const Value& v) {
  for (const Value& t : v["threads"].as_array())
    if (t["name"].as_string() == "Garbage Collection") return t;
  ADD_FAILURE() << "no Garbage Collection track";
  return v;
}

const Value* Schema(const Value& v, const std::string& name) {
  for (const Value& s : v["meta"]["markerSchema"].as_array())
    if (s["name"].as_string() == name) return &s;
  return nullptr;
}

// v48 keeps a schema's fields under "data", its description there too as a
// {label: "Description", value} entry.
std::string Description(const Value& schema) {
  for (const Value& f : schema["data"].as_array())
    if (f.find("value") != nullptr) return f["value"].as_string();
  return "";
}

std::vector<std::string> FieldKeys(const Value& schema) {
  std::vector<std::string> keys;
  for (const Value& f : schema["data"].as_array())
    if (f.find("key") != nullptr) keys.push_back(f["key"].as_string());
  return keys;
}

std::vector<std::string> MarkerNames(const Value& track) {
  std::vector<std::string> names;
  for (const Value& i : track["markers"]["name"].as_array())
    names.push_back(track["stringArray"][static_cast<size_t>(i.as_int())].as_string());
  return names;
}

TEST(FirefoxGcTrackTest, CountersMakeOneGcPollMarkerPerReadWithOnlyKnownFields) {
  Value v = test_util::json::Parse(EncodeGcFirefox(Counters(), false));
  EXPECT_EQ(test_util::FirefoxFormatErrors(v), "");
  EXPECT_EQ(Schema(v, "GC"), nullptr) << "the hooks' schema is not used";
  const Value* schema = Schema(v, "GCPoll");
  ASSERT_NE(schema, nullptr);
  std::string description = Description(*schema);
  EXPECT_NE(description.find("GC.stat(:time)"), std::string::npos) << description;
  EXPECT_EQ(FieldKeys(*schema),
            (std::vector<std::string>{"gcs", "minor_gcs", "major_gcs", "cpu_ms", "latest", "reason", "gc_cause"}));

  const Value& gc = GcTrack(v);
  // Named by the types the read saw (a row per name in the marker chart).
  EXPECT_EQ(MarkerNames(gc), (std::vector<std::string>{"Minor GC", "Minor + major GCs", "Major GC"}));
  const Value& data = gc["markers"]["data"];
  ASSERT_EQ(data.size(), 3u);
  const Value& minors = data[0];
  EXPECT_EQ(minors["type"].as_string(), "GCPoll");
  EXPECT_EQ(minors["gcs"].as_int(), 3);
  EXPECT_EQ(minors["minor_gcs"].as_int(), 3);
  EXPECT_EQ(minors["major_gcs"].as_int(), 0);
  EXPECT_DOUBLE_EQ(minors["cpu_ms"].as_double(), 8.0);
  EXPECT_EQ(minors["latest"].as_string(), "minor");
  EXPECT_EQ(minors["gc_cause"].as_string(), "newobj");
  EXPECT_EQ(minors.find("reason"), nullptr) << "a minor GC has no major_by";
  const Value& mixed = data[1];
  EXPECT_EQ(mixed["minor_gcs"].as_int(), 2);
  EXPECT_EQ(mixed["major_gcs"].as_int(), 1);
  EXPECT_EQ(mixed["latest"].as_string(), "major");
  EXPECT_EQ(mixed["reason"].as_string(), "force");
  EXPECT_EQ(mixed["gc_cause"].as_string(), "method");
  const Value& bare = data[2];
  EXPECT_EQ(bare.find("reason"), nullptr);
  EXPECT_EQ(bare.find("gc_cause"), nullptr) << "an unknown cause is left out, not shown as 'unknown'";
  for (const Value& d : data.as_array()) {
    EXPECT_EQ(d.find("steps"), nullptr);
    EXPECT_EQ(d.find("gc_ms"), nullptr);
  }
  // Markers span the read's CPU time in GC, ending at the read.
  EXPECT_DOUBLE_EQ(gc["markers"]["startTime"][1].as_double(), 203.0);
  EXPECT_DOUBLE_EQ(gc["markers"]["endTime"][1].as_double(), 210.0);

  // The track's time is the CPU time, once per read: an Idle sample at the
  // track's start (registerTime), then a weighted sample at each marker's
  // start and a weight-0 Idle one at its end.
  const Value& samples = gc["samples"];
  EXPECT_EQ(samples["weightType"].as_string(), "tracing-ms");
  ASSERT_EQ(samples["length"].as_int(), 7);
  std::vector<double> weights;
  for (const Value& w : samples["weight"].as_array()) weights.push_back(w.as_double());
  EXPECT_EQ(weights, (std::vector<double>{0.0, 8.0, 0.0, 7.0, 0.0, 0.0, 0.0}));
}

TEST(FirefoxGcTrackTest, CountersBesideThreadTracksSaySoToo) {
  firefox::Profile profile("p", 0, 1);
  profile.AddCategory({"Other", "grey", {}});
  AddGcTrack(profile, Counters(), 0, /*beside_thread_tracks=*/true);
  Value v = test_util::json::Parse(profile.ToJson());
  const Value* schema = Schema(v, "GCPoll");
  ASSERT_NE(schema, nullptr);
  EXPECT_NE(Description(*schema).find("merged with them it counts twice"), std::string::npos);
}

// The hooks source's track as before: "GC" markers of one type each, with
// wall and CPU time and steps, weighted by wall time.
TEST(FirefoxGcTrackTest, HooksKeepTheGcSchemaWithStepsAndWallTime) {
  GcProfileData d = Base(GcSource::kHooks);
  GcPeriod p;
  p.start_ns = 1100 * kMs;
  p.end_ns = 1105 * kMs;
  p.wall_ns = 4 * kMs;
  p.cpu_ns = 3 * kMs;
  p.steps = 12;
  p.cycles_started = 1;
  p.type = GcType::kMinor;
  p.cause = GcCause::kNewobj;
  d.periods = {p};
  Value v = test_util::json::Parse(EncodeGcFirefox(d, false));
  EXPECT_EQ(test_util::FirefoxFormatErrors(v), "");
  EXPECT_EQ(Schema(v, "GCPoll"), nullptr);
  ASSERT_NE(Schema(v, "GC"), nullptr);
  const Value& gc = GcTrack(v);
  EXPECT_EQ(MarkerNames(gc), std::vector<std::string>{"Minor GC"});
  const Value& m = gc["markers"]["data"][0];
  EXPECT_EQ(m["type"].as_string(), "GC");
  EXPECT_DOUBLE_EQ(m["gc_ms"].as_double(), 4.0);
  EXPECT_DOUBLE_EQ(m["cpu_ms"].as_double(), 3.0);
  EXPECT_EQ(m["steps"].as_int(), 12);
  EXPECT_EQ(m["reason"].as_string(), "-");
  EXPECT_DOUBLE_EQ(gc["samples"]["weight"][0].as_double(), 0.0);  // registerTime's Idle sample
  EXPECT_DOUBLE_EQ(gc["samples"]["weight"][1].as_double(), 4.0);
}

}  // namespace
}  // namespace fathom
