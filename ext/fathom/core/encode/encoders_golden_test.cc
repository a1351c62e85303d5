// Every encoder on one fixed input: the heap, CPU/wall, GC and retention
// pprof encoders, and the Firefox Profiler documents (CPU alone and
// combined with GC and heap). Each must encode it (and its pprof be gzip
// that inflates).
//
// How to show that a refactoring leaves the bytes alone: run this test on
// the build before and on the build after with FATHOM_GOLDEN_DIR set to two
// directories, which receive each output uncompressed as <name>.bin
// (FNV-1a hash in the test's log), then cmp them. The hashes were pinned
// here while the stacks and schemas were reshaped (issue 42); they are
// not any more, so that a change of format (a new sample type, a label)
// touches only what it changes.
#include <gtest/gtest.h>

#include <cinttypes>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "cpu/cpu_profile.h"
#include "gc/gc_profile.h"
#include "heap/heap_encode.h"
#include "labels/label_sets.h"
#include "retention/dominators.h"
#include "retention/heap_graph.h"
#include "retention/retention_profile.h"
#include "testing/gunzip.h"
#include "timeline/firefox_combined.h"

namespace fathom {
namespace {

uint64_t Fnv1a(const std::string& bytes) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return h;
}

std::string Hex(uint64_t h) {
  char buf[24];
  snprintf(buf, sizeof buf, "%016" PRIx64, h);
  return buf;
}

// Checks that there is output; writes it to FATHOM_GOLDEN_DIR/<name>.bin
// when set, and says its size and FNV-1a hash.
void ExpectBytes(const char* name, const std::string& bytes) {
  if (const char* dir = std::getenv("FATHOM_GOLDEN_DIR")) {
    std::ofstream(std::string(dir) + "/" + name + ".bin", std::ios::binary) << bytes;
  }
  EXPECT_FALSE(bytes.empty()) << name;
  std::printf("%s: %zu bytes, fnv1a %s\n", name, bytes.size(), Hex(Fnv1a(bytes)).c_str());
}

FrameSymbol Sym(const char* name, const char* file, int64_t first_line, bool native = false) {
  FrameSymbol s;
  s.name = name;
  s.filename = file;
  s.first_line = first_line;
  s.resolved = true;
  s.native = native;
  return s;
}

LabelSets& Labels() {
  static LabelSets* sets = [] {
    auto* s = new LabelSets(8);
    s->Intern({{"endpoint", "UsersController#show"}});          // id 2
    s->Intern({{"endpoint", "Jobs#run"}, {"queue", "default"}});  // id 3
    return s;
  }();
  return *sets;
}

OutputStamp Stamp() {
  OutputStamp s;
  s.comments = {"pid=4242", "hostname=web-1", "ruby=3.1.2 (x86_64-linux-gnu)"};
  s.window = true;
  return s;
}

HeapProfileRows HeapRows(bool sampled) {
  HeapProfileRows r;
  r.symbols = {Sym("Foo#bar", "/app/foo.rb", 10), Sym("Integer#times", "<cfunc>", 0), Sym("<main>", "/app/main.rb", 1),
               Sym("block in Foo#bar", "/app/foo.rb", 12), Sym("Foo#bar", "/app/foo.rb", 10)};
  r.stacks = {{{0, 11}, {1, 0}, {2, 3}},
              {{3, 13}, {0, 12}, {2, 3}},
              {{4, 11}, {2, 4}},  // a symbol with the same name, file and line as 0
              {},
              {{3, 14}}};
  r.truncated = {false, false, false, false, true};
  r.labels = {"", "String", "Array", "main", "worker", "Hash"};
  auto row = [](uint32_t stack, uint32_t cls, uint32_t thread, std::vector<int64_t> v, uint32_t label_set) {
    HeapProfileRows::Row row{stack, cls, thread, HeapValues{}, label_set};
    row.values.alloc_objects = v[0];
    row.values.alloc_space = v[1];
    row.values.inuse_objects = v[2];
    row.values.inuse_space = v[3];
    row.values.alloc_samples = v[4];
    row.values.inuse_samples = v[5];
    return row;
  };
  r.rows = {row(0, 1, 3, {100, 4000, 40, 1600, 5, 2}, 0), row(1, 2, 4, {7, 560, 7, 560, 1, 1}, 2),
            row(2, 1, 3, {3, 120, 0, 0, 1, 0}, 3),           row(3, 5, 0, {1, 160, 1, 160, 1, 1}, 0),
            row(4, 1, 4, {2, 80, 2, 80, 2, 2}, 0),           row(0, 5, 3, {9, 900, 9, 900, 3, 3}, 2)};
  r.allocations = {{1500, 0, 1, 3, 50, 2000}, {2500, 1, 2, 4, 7, 560}, {3500, 4, 1, 4, 2, 80}};
  r.start_monotonic_ns = 1000;
  r.pid = 4242;
  r.time_nanos = 1764169200000000000;
  r.duration_nanos = 2000000000;
  if (sampled) {
    r.period_type = ValueType{"sample_interval", "nanoseconds"};
    r.sample_period = 10000000;
    r.comment = "fathom heap profile, sampled mode (interval 10000000ns)";
    r.census_comment = "Live bytes: calibrated to a heap census of 12 objects";
    r.sampling_comment = "Ticks: 200, all reached Ruby";
  } else {
    r.comment = "fathom heap profile, exact mode (every allocation)";
  }
  r.stamp = Stamp();
  r.label_sets = &Labels();
  return r;
}

CpuProfileData CpuData(CpuMode mode) {
  CpuProfileData d;
  d.mode = mode;
  d.interval_ns = 10000000;
  d.start_realtime_ns = 1764169200000000000;
  d.start_monotonic_ns = 1000000;
  d.duration_ns = 500000000;
  d.pid = 4242;
  d.symbols = {Sym("Foo#bar", "/app/foo.rb", 10), Sym("Kernel#sleep", "<cfunc>", 0), Sym("<main>", "/app/main.rb", 1),
               Sym("deflate", "libz.so.1", 0, true), Sym("Zlib::Deflate.deflate", "", 0)};
  auto row = [](std::vector<uint32_t> frames, std::vector<int32_t> lines, bool truncated, int32_t tid,
                ThreadState state, int64_t samples, int64_t cpu, int64_t wall, uint32_t label_set, uint64_t span) {
    CpuProfileData::Row r;
    for (size_t i = 0; i < frames.size(); i++) r.stack.push_back(StackFrame{frames[i], lines[i]});
    r.truncated = truncated;
    r.thread_id = tid;
    r.state = state;
    r.values.samples = samples;
    r.values.cpu_ns = cpu;
    r.values.wall_ns = wall;
    r.labels.label_set = label_set;
    r.labels.span_id = span;
    return r;
  };
  d.rows = {row({0, 2}, {11, 3}, false, 4242, ThreadState::kRunning, 10, 100000000, 101000000, 0, 0),
            row({1, 0, 2}, {0, 12, 3}, false, 4243, ThreadState::kBlocked, 5, 1000, 50000000, 2, 0xabcdef),
            row({}, {}, false, 4242, ThreadState::kGc, 2, 20000000, 20000000, 0, 0),
            row({}, {}, false, 4243, ThreadState::kBlocked, 1, 0, 10000000, 0, 0),
            row({3, 4, 2}, {0, 0, 7}, false, 4244, ThreadState::kNoGvl, 3, 30000000, 31000000, 3, 0),
            row({0}, {15}, true, 4242, ThreadState::kGvlWait, 1, 0, 9000000, 0, 0x1)};
  d.thread_names = {{4242, "main"}, {4243, "worker"}};
  d.timeline_stacks = {{{{0, 11}, {2, 3}}, 0}, {{{1, 0}, {0, 12}, {2, 3}}, 0}, {{{3, 0}, {4, 0}, {2, 7}}, 0}};
  d.timeline = {{11000000, 4242, 0, ThreadState::kRunning, 10000000, 10000000, 0},
                {21000000, 4242, 0, ThreadState::kRunning, 9000000, 10000000, 0},
                {31000000, 4243, 1, ThreadState::kBlocked, 0, 30000000, 0},
                {41000000, 4242, UINT32_MAX, ThreadState::kGc, 5000000, 5000000, 0},
                {52000000, 4244, 2, ThreadState::kNoGvl, 8000000, 10000000, 0},
                {90000000, 4243, 1, ThreadState::kGvlWait, 0, 59000000, 0}};
  d.dropped = 3;
  d.state_source = "thread-events";
  d.stamp = Stamp();
  d.label_sets = &Labels();
  return d;
}

GcProfileData GcData(GcSource source) {
  GcProfileData d;
  d.source = source;
  d.start_realtime_ns = 1764169200000000000;
  d.start_monotonic_ns = 1000000;
  d.end_monotonic_ns = 501000000;
  d.flush_interval_ns = 10000000;
  d.poll_interval_ns = source == GcSource::kCounters ? 10000000 : 0;
  d.pid = 4242;
  auto period = [](int64_t start, int64_t wall, int64_t cpu, uint32_t steps, GcType type, GcReason reason,
                   GcCause cause, uint32_t minor, uint32_t major) {
    GcPeriod p;
    p.start_ns = start;
    p.end_ns = start + wall + 1000;
    p.wall_ns = wall;
    p.cpu_ns = cpu;
    p.steps = steps;
    p.cycles_started = minor + major > 0 ? minor + major : 1;
    p.type = type;
    p.reason = reason;
    p.cause = cause;
    p.minor_gcs = minor;
    p.major_gcs = major;
    return p;
  };
  d.periods = {period(11000000, 3000000, 2900000, 4, GcType::kMinor, GcReason::kNone, GcCause::kNewobj, 0, 0),
               period(61000000, 9000000, 8800000, 12, GcType::kMajor, GcReason::kOldgen, GcCause::kMalloc, 0, 0),
               period(81000000, 2000000, 1900000, 3, GcType::kMinor, GcReason::kNone, GcCause::kNewobj, 0, 0),
               period(120000000, 1000000, 900000, 0, GcType::kMajor, GcReason::kForce, GcCause::kMethod, 2, 1)};
  for (int64_t pause : {500000, 700000, 1200000, 3000000, 250000}) d.pauses.Record(pause);
  d.stamp = Stamp();
  return d;
}

// global_tbl -> $sessions (Hash) -> 3 sessions -> their strings; a Config
// shared by two sessions; a Widget reachable from two root categories.
HeapGraph RetentionGraph() {
  struct Obj {
    const char* edge;
    const char* klass;
    uint64_t size;
    std::vector<uint64_t> refs;
  };
  std::map<uint64_t, Obj> objects = {
      {0x100, {"$sessions", "Hash", 100, {0x200, 0x300, 0x400}}}, {0x900, {"$w", "Widget", 1000, {}}},
      {0x200, {"{a}", "Session", 40, {0x210, 0x500}}},             {0x300, {"{b}", "Session", 40, {0x310, 0x500}}},
      {0x400, {"{c}", "Session", 40, {0x410, 0x420}}},             {0x210, {"@token", "String", 20, {}}},
      {0x310, {"@token", "String", 20, {}}},                       {0x410, {"[]", "String", 20, {}}},
      {0x420, {"[]", "String", 30, {}}},                           {0x500, {"@config", "Config", 200, {0x200}}}};
  HeapGraphBuilder b;
  uint32_t globals = b.AddRootCategory("global_tbl");
  uint32_t vm = b.AddRootCategory("vm");
  b.BeginEdgesOf(globals);
  b.AddEdgeTo(0x100);
  b.AddEdgeTo(0x900);
  b.BeginEdgesOf(vm);
  b.AddEdgeTo(0x900);
  for (uint32_t v = b.first_object_node(); v < b.node_count(); v++) {
    const Obj& o = objects.at(b.address(v));
    b.SetNodeInfo(v, b.InternName(o.klass), 0, o.size);
    b.BeginEdgesOf(v);
    for (uint64_t a : o.refs) b.AddEdgeTo(a);
  }
  HeapGraph g = b.Finish();
  for (uint32_t v = g.first_object_node(); v < g.node_count(); v++) g.SetEdgeName(v, objects.at(g.address(v)).edge);
  return g;
}

TEST(EncodersGoldenTest, HeapPprof) {
  ExpectBytes("heap_exact", GzipDecompress(EncodeHeapProfile(HeapRows(false))));
  ExpectBytes("heap_sampled", GzipDecompress(EncodeHeapProfile(HeapRows(true))));
}

TEST(EncodersGoldenTest, CpuPprofAndFirefox) {
  ExpectBytes("cpu_pprof", GzipDecompress(EncodeCpuPprof(CpuData(CpuMode::kCpu))));
  ExpectBytes("wall_pprof", GzipDecompress(EncodeCpuPprof(CpuData(CpuMode::kWall))));
  ExpectBytes("cpu_firefox", EncodeCpuFirefox(CpuData(CpuMode::kCpu), false));
  ExpectBytes("wall_firefox", EncodeCpuFirefox(CpuData(CpuMode::kWall), false));
}

TEST(EncodersGoldenTest, GcPprof) {
  ExpectBytes("gc_hooks", GzipDecompress(EncodeGcPprof(GcData(GcSource::kHooks))));
  ExpectBytes("gc_counters", GzipDecompress(EncodeGcPprof(GcData(GcSource::kCounters))));
}

TEST(EncodersGoldenTest, RetentionPprof) {
  HeapGraph g = RetentionGraph();
  MappedVector<uint32_t> idom = ComputeDominators(g);
  MappedVector<uint64_t> retained = RetainedSizes(g, idom);
  RetentionProfileOptions options;
  options.time_nanos = 1764169200000000000;
  options.duration_nanos = 30000000;
  options.comment = "fathom retention snapshot";
  options.stamp = Stamp();
  ExpectBytes("retention", GzipDecompress(EncodeRetentionProfile(g, idom, retained, options)));
  options.max_depth = 3;
  ExpectBytes("retention_depth3", GzipDecompress(EncodeRetentionProfile(g, idom, retained, options)));
}

TEST(EncodersGoldenTest, CombinedFirefox) {
  CpuProfileData cpu = CpuData(CpuMode::kWall);
  GcProfileData gc = GcData(GcSource::kHooks);
  HeapProfileRows heap = HeapRows(true);
  ExpectBytes("combined_firefox", EncodeCombinedFirefox(&cpu, &gc, &heap, false));
  ExpectBytes("heap_only_firefox", EncodeCombinedFirefox(nullptr, nullptr, &heap, false));
}

}  // namespace
}  // namespace fathom
