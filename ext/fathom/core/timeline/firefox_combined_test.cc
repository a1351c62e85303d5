// The combined cpu+gc+heap Firefox file: tracks, time base, allocations on
// the allocating thread's track, threadCPUDelta, C frames; structurally
// checked by the v48 validator.
#include "timeline/firefox_combined.h"

#include <gtest/gtest.h>

#include <string>

#include "testing/firefox_format_check.h"
#include "testing/mini_json.h"

namespace fathom {
namespace {

using test_util::json::Value;

constexpr int64_t kMono = 5000000000;         // CPU start, CLOCK_MONOTONIC
constexpr int64_t kReal = 1700000000000000000;  // the same moment, Unix ns

CpuProfileData Cpu() {
  CpuProfileData d;
  d.mode = CpuMode::kCpu;
  d.interval_ns = 10000000;
  d.pid = 100;
  d.start_monotonic_ns = kMono;
  d.start_realtime_ns = kReal;
  d.duration_ns = 1000000000;
  d.symbols = {{"Object#burn", "/app/a.rb", 3, true},
               {"<main>", "/app/a.rb", 1, true},
               {"Zlib::Deflate.deflate", "", 0, true},
               {"deflate", "/lib/libz.so.1", 0, true, /*native=*/true}};
  // main: <main> > Object#burn; worker: <main> > Zlib::Deflate.deflate > deflate (C)
  d.timeline_stacks = {{{{0, 4}, {1, 9}}}, {{{3, 0}, {2, 0}, {1, 7}}}};
  d.timeline = {
      {kMono + 10000000, 100, 0, ThreadState::kRunning, 9000000, 10000000},
      {kMono + 20000000, 100, 0, ThreadState::kRunning, 8000000, 10000000},
      {kMono + 15000000, 101, 1, ThreadState::kRunning, 7000000, 15000000},
  };
  d.thread_names = {{100, "main"}, {101, "worker"}};
  return d;
}

GcProfileData Gc() {
  GcProfileData g;
  g.pid = 100;
  g.start_monotonic_ns = kMono - 2000000;  // started 2 ms before the CPU profiler: the profile's start
  g.start_realtime_ns = kReal - 2000000;
  g.end_monotonic_ns = kMono + 900000000;
  GcPeriod p;
  p.start_ns = kMono + 30000000;
  p.end_ns = kMono + 31000000;
  p.wall_ns = 1000000;
  p.steps = 1;
  p.cycles_started = 1;
  p.type = GcType::kMinor;
  g.periods = {p};
  return g;
}

HeapProfileRows Heap() {
  HeapProfileRows h;
  h.pid = 100;
  h.start_monotonic_ns = kMono + 1000000;
  h.time_nanos = kReal + 1000000;
  h.duration_nanos = 800000000;
  h.symbols = {{"Object#make", "/app/a.rb", 20, true}, {"String#*", "", 0, true}};
  h.stacks = {{{1, 0}, {0, 21}}};
  h.truncated = {false};
  h.labels = {"", "String", "main", "thread 101", "some other thread"};
  h.allocations = {{kMono + 5000000, 0, 1, 2, 100, 4000},
                   {kMono + 6000000, 0, 1, 3, 100, 8000},
                   {kMono + 7000000, 0, 1, 4, 50, 2000}};
  return h;
}

const Value* Track(const Value& v, const std::string& name) {
  for (const Value& t : v["threads"].as_array())
    if (t["name"].as_string() == name) return &t;
  return nullptr;
}

TEST(FirefoxCombinedTest, OneFileWithCpuTracksGcTrackAndAllocations) {
  CpuProfileData cpu = Cpu();
  GcProfileData gc = Gc();
  HeapProfileRows heap = Heap();
  std::string text = EncodeCombinedFirefox(&cpu, &gc, &heap, false);
  Value v = test_util::json::Parse(text);
  EXPECT_EQ(test_util::FirefoxFormatErrors(v), "");
  // The earliest start (the GC profiler's) is the profile's.
  EXPECT_DOUBLE_EQ(v["meta"]["startTime"].as_double(), (kReal - 2000000) / 1e6);
  EXPECT_EQ(v["meta"]["sampleUnits"]["threadCPUDelta"].as_string(), "ns");
  ASSERT_EQ(v["threads"].size(), 3u);
  const Value* main = Track(v, "main");
  const Value* worker = Track(v, "worker");
  const Value* gct = Track(v, "Garbage Collection");
  ASSERT_TRUE(main && worker && gct);
  // CPU times shifted by the 2 ms the GC profiler started earlier. The
  // track begins where its first sample's wall delta does (registerTime,
  // and a weightless empty sample there: no "empty buffer" hatch before it).
  EXPECT_DOUBLE_EQ((*main)["registerTime"].as_double(), 2.0);
  EXPECT_DOUBLE_EQ((*main)["samples"]["time"][0].as_double(), 2.0);
  EXPECT_TRUE((*main)["samples"]["stack"][0].is_null());
  EXPECT_EQ((*main)["samples"]["threadCPUDelta"][0].as_int(), 0);
  EXPECT_DOUBLE_EQ((*main)["samples"]["time"][1].as_double(), 12.0);
  EXPECT_DOUBLE_EQ((*main)["samples"]["time"][2].as_double(), 22.0);
  EXPECT_EQ((*main)["samples"]["threadCPUDelta"][1].as_int(), 9000000);
  EXPECT_EQ((*main)["samples"]["threadCPUDelta"][2].as_int(), 8000000);
  // The GC track begins at the GC profiler's start, with an Idle sample.
  EXPECT_DOUBLE_EQ((*gct)["registerTime"].as_double(), 0.0);
  EXPECT_DOUBLE_EQ((*gct)["samples"]["weight"][0].as_double(), 0.0);
  EXPECT_DOUBLE_EQ((*gct)["markers"]["startTime"][0].as_double(), 32.0);
  // The GC track keeps its weights beside CPU tracks (its call tree would be
  // empty otherwise); the schema says the threads hold the same time.
  EXPECT_DOUBLE_EQ((*gct)["samples"]["weight"][1].as_double(), 1.0);
  EXPECT_NE(text.find("merged with them it counts twice"), std::string::npos);
  // Allocations: "main" and unknown threads on main, "thread 101" on worker.
  EXPECT_EQ((*main)["jsAllocations"]["length"].as_int(), 2);
  EXPECT_EQ((*worker)["jsAllocations"]["length"].as_int(), 1);
  EXPECT_EQ((*worker)["jsAllocations"]["weight"][0].as_double(), 8000);
  EXPECT_EQ((*worker)["jsAllocations"]["className"][0].as_string(), "String");
  EXPECT_DOUBLE_EQ((*main)["jsAllocations"]["time"][0].as_double(), 7.0);
  EXPECT_EQ(gct->find("jsAllocations"), nullptr);
  // The allocation's stack ends in its class ("new String": the profiler
  // shows className nowhere else), under the allocating Ruby method.
  const Value& ja = (*main)["jsAllocations"];
  const Value& st = (*main)["stackTable"];
  auto func_name = [&](int64_t stack) {
    size_t frame = static_cast<size_t>(st["frame"][static_cast<size_t>(stack)].as_int());
    size_t func = static_cast<size_t>((*main)["frameTable"]["func"][frame].as_int());
    return (*main)["stringArray"][static_cast<size_t>((*main)["funcTable"]["name"][func].as_int())].as_string();
  };
  auto prefix = [&](int64_t stack) { return st["prefix"][static_cast<size_t>(stack)].as_int(); };
  int64_t stack = ja["stack"][0].as_int();
  EXPECT_EQ(func_name(stack), "new String");
  EXPECT_EQ(func_name(prefix(stack)), "String#*");
  EXPECT_EQ(func_name(prefix(prefix(stack))), "Object#make");
  // The C frame is there, not JS, in the "Native (C)" category.
  EXPECT_NE(text.find("\"Native (C)\""), std::string::npos);
  const Value& wf = (*worker)["funcTable"];
  bool found = false;
  for (size_t i = 0; i < wf["name"].size(); i++) {
    if ((*worker)["stringArray"][static_cast<size_t>(wf["name"][i].as_int())].as_string() != "deflate") continue;
    found = true;
    EXPECT_FALSE(wf["isJS"][i].as_bool());
  }
  EXPECT_TRUE(found);
}

TEST(FirefoxCombinedTest, GcAndHeapWithoutCpuGetOneRubyTrack) {
  GcProfileData gc = Gc();
  HeapProfileRows heap = Heap();
  Value v = test_util::json::Parse(EncodeCombinedFirefox(nullptr, &gc, &heap, false));
  EXPECT_EQ(test_util::FirefoxFormatErrors(v), "");
  ASSERT_EQ(v["threads"].size(), 2u);
  const Value* ruby = Track(v, "ruby");
  ASSERT_TRUE(ruby);
  EXPECT_EQ((*ruby)["jsAllocations"]["length"].as_int(), 3);
  EXPECT_EQ(v["meta"].find("sampleUnits"), nullptr);
}

TEST(FirefoxCombinedTest, ValidatorRejectsBrokenNewColumns) {
  CpuProfileData cpu = Cpu();
  HeapProfileRows heap = Heap();
  std::string text = EncodeCombinedFirefox(&cpu, nullptr, &heap, false);
  {
    Value v = test_util::json::Parse(text);
    v.mut("meta").erase("sampleUnits");
    EXPECT_NE(test_util::FirefoxFormatErrors(v).find("needs meta.sampleUnits.threadCPUDelta"), std::string::npos);
  }
  {
    Value v = test_util::json::Parse(text);
    v.mut("threads").mut(0).mut("jsAllocations").mut("stack").mut(0) = Value::Number(9999, true, 9999);
    EXPECT_NE(test_util::FirefoxFormatErrors(v).find("jsAllocations.stack[0]"), std::string::npos);
  }
  {
    Value v = test_util::json::Parse(text);
    v.mut("threads").mut(0).mut("jsAllocations").mut("weightType") = Value::String("count");
    EXPECT_NE(test_util::FirefoxFormatErrors(v).find("jsAllocations.weightType"), std::string::npos);
  }
}

}  // namespace
}  // namespace fathom
