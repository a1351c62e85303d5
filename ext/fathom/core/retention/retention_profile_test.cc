#include "retention/retention_profile.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <iostream>
#include <map>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "retention/dominators.h"
#include "testing/external_tools.h"
#include "retention/heap_graph.h"

namespace fathom {
namespace {

using test_util::RunCommand;
using test_util::ShellQuote;
using test_util::TempDir;
using Strs = std::vector<std::string>;

// Builds a graph from a BFS over a hand-written object table, naming edges
// and classes as the Ruby side would.
struct Obj {
  uint64_t addr;
  std::string edge_name;  // of the edge from its first referrer
  std::string klass;
  uint64_t size;
  std::vector<uint64_t> refs;
};

struct HandHeap {
  std::vector<std::pair<std::string, std::vector<uint64_t>>> roots;  // category -> objects
  std::map<uint64_t, Obj> objects;

  HeapGraph Build() const {
    HeapGraphBuilder b;
    std::vector<uint32_t> cats;
    for (const auto& r : roots) cats.push_back(b.AddRootCategory(r.first));
    for (size_t i = 0; i < roots.size(); i++) {
      b.BeginEdgesOf(cats[i]);
      for (uint64_t a : roots[i].second) b.AddEdgeTo(a);
    }
    for (uint32_t v = b.first_object_node(); v < b.node_count(); v++) {
      const Obj& o = objects.at(b.address(v));
      b.SetNodeInfo(v, b.InternName(o.klass), 0, o.size);
      b.BeginEdgesOf(v);
      for (uint64_t a : o.refs) b.AddEdgeTo(a);
    }
    HeapGraph g = b.Finish();
    for (uint32_t v = g.first_object_node(); v < g.node_count(); v++) g.SetEdgeName(v, objects.at(g.address(v)).edge_name);
    return g;
  }
};

// global_tbl -> $sessions (Hash) -> 3 sessions -> their strings; the Config
// object is shared by sessions a and b; a Widget is a root of two categories.
constexpr uint64_t kHash = 0x100, kS1 = 0x200, kS2 = 0x300, kS3 = 0x400, kT1 = 0x210, kT2 = 0x310, kT3 = 0x410,
                   kT4 = 0x420, kConfig = 0x500, kWidget = 0x900;

HandHeap SessionsHeap() {
  HandHeap h;
  h.roots = {{"global_tbl", {kHash, kWidget}}, {"vm", {kWidget}}};
  h.objects[kHash] = {kHash, "$sessions", "Hash", 100, {kS1, kS2, kS3}};
  h.objects[kWidget] = {kWidget, "$w", "Widget", 1000, {}};
  h.objects[kS1] = {kS1, "{a}", "Session", 40, {kT1, kConfig}};
  h.objects[kS2] = {kS2, "{b}", "Session", 40, {kT2, kConfig, kS2}};
  h.objects[kS3] = {kS3, "{c}", "Session", 40, {kT3, kT4}};
  h.objects[kT1] = {kT1, "@token", "String", 20, {}};
  h.objects[kT2] = {kT2, "@token", "String", 20, {}};
  h.objects[kT3] = {kT3, "[]", "String", 20, {}};
  h.objects[kT4] = {kT4, "[]", "String", 30, {}};  // same frame as kT3: one merged sample
  h.objects[kConfig] = {kConfig, "@config", "Config", 200, {kS1}};
  return h;
}

uint32_t NodeOf(const HeapGraph& g, uint64_t addr) {
  for (uint32_t v = 0; v < g.node_count(); v++)
    if (!g.is_virtual(v) && g.address(v) == addr) return v;
  throw std::runtime_error("no node for address");
}

// `go tool pprof -raw` output, parsed: the sample-type header, samples
// (values and frame names, root first) and the other header lines.
struct RawProfile {
  std::string header;
  struct Sample {
    std::vector<int64_t> values;
    Strs frames;  // root first
  };
  std::vector<Sample> samples;
  std::string output;

  // Values of the sample with these frames (root first); empty if none.
  std::vector<int64_t> ValuesOf(const Strs& frames) const {
    for (const Sample& s : samples)
      if (s.frames == frames) return s.values;
    return {};
  }
};

std::string Trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

class GoPprof {
 public:
  explicit GoPprof(const std::string& gz) {
    file_ = dir_.file("retention.pb.gz");
    test_util::WriteFile(file_, gz);
  }

  test_util::CommandResult Run(const std::string& args) {
    // go wants a writable HOME and build cache, which a test sandbox may lack.
    std::string env = "HOME=" + ShellQuote(dir_.path()) + " GOCACHE=" + ShellQuote(dir_.file("gocache")) +
                      " GOPATH=" + ShellQuote(dir_.file("gopath")) + " PPROF_TMPDIR=" + ShellQuote(dir_.path());
    return RunCommand("env " + env + " go tool pprof " + args + " " + ShellQuote(file_));
  }

  RawProfile Raw() {
    test_util::CommandResult r = Run("-raw -symbolize=none");
    RawProfile p;
    p.output = r.output;
    EXPECT_EQ(r.exit_code, 0) << r.output;
    std::istringstream in(r.output);
    std::string line, section;
    std::map<std::string, std::string> names;  // location id -> function name
    std::vector<std::pair<std::vector<int64_t>, Strs>> raw;  // values, location ids (leaf first)
    while (std::getline(in, line)) {
      if (line == "Samples:" || line == "Locations" || line == "Mappings") {
        section = line;
        continue;
      }
      if (section == "Samples:") {
        if (p.header.empty()) {
          p.header = Trim(line);
          continue;
        }
        size_t colon = line.find(':');
        if (colon == std::string::npos) continue;
        std::istringstream vals(line.substr(0, colon)), ids(line.substr(colon + 1));
        std::vector<int64_t> values;
        for (int64_t x; vals >> x;) values.push_back(x);
        Strs locs;
        for (std::string id; ids >> id;) locs.push_back(id);
        raw.emplace_back(values, locs);
      } else if (section == "Locations") {
        // "     3: 0x0 M=1 {a} → @config (Config) :0 s=0"
        std::string t = Trim(line);
        size_t colon = t.find(": 0x0 M=1 ");
        if (colon == std::string::npos) continue;
        std::string rest = t.substr(colon + 10);
        size_t end = rest.rfind(" :0 s=0");
        EXPECT_NE(end, std::string::npos) << line;
        names[t.substr(0, colon)] = rest.substr(0, end);
      }
    }
    for (auto& [values, locs] : raw) {
      RawProfile::Sample s;
      s.values = values;
      for (size_t i = locs.size(); i-- > 0;) s.frames.push_back(names.count(locs[i]) ? names[locs[i]] : "?" + locs[i]);
      p.samples.push_back(s);
    }
    return p;
  }

 private:
  TempDir dir_;
  std::string file_;
};

struct Analysis {
  HeapGraph g;
  MappedVector<uint32_t> idom;
  MappedVector<uint64_t> retained;

  explicit Analysis(HeapGraph graph) : g(std::move(graph)), idom(ComputeDominators(g)), retained(RetainedSizes(g, idom)) {}
};

TEST(RetentionProfileTest, SharedObjectIsChargedAtItsDominator) {
  Analysis a(SessionsHeap().Build());
  const HeapGraph& g = a.g;
  uint32_t hash = NodeOf(g, kHash), s1 = NodeOf(g, kS1), s3 = NodeOf(g, kS3), config = NodeOf(g, kConfig),
           widget = NodeOf(g, kWidget), t4 = NodeOf(g, kT4);
  EXPECT_EQ(a.idom[config], hash);  // not s1 (its BFS parent) or s2
  EXPECT_EQ(g.tree_parent(config), s1);
  EXPECT_EQ(a.idom[hash], 1u);  // global_tbl
  EXPECT_EQ(a.idom[widget], 0u);  // reachable from two categories
  EXPECT_EQ(a.retained[hash], 100u + 60 + 60 + 90 + 200);
  EXPECT_EQ(a.retained[s1], 60u);
  EXPECT_EQ(a.retained[s3], 90u);
  EXPECT_EQ(a.retained[0], 1510u);

  EXPECT_EQ(FrameName(g, a.idom, 0), "(roots)");
  EXPECT_EQ(FrameName(g, a.idom, 1), "(root: global_tbl)");
  EXPECT_EQ(FrameName(g, a.idom, hash), "$sessions (Hash)");
  EXPECT_EQ(FrameName(g, a.idom, config), "{a} \u2192 @config (Config)");
  EXPECT_EQ(FrameName(g, a.idom, widget), "global_tbl \u2192 $w (Widget)");
  Strs path;
  for (uint32_t v : DominatorPath(a.idom, t4)) path.push_back(FrameName(g, a.idom, v));
  EXPECT_EQ(path, (Strs{"[] (String)", "{c} (Session)", "$sessions (Hash)", "(root: global_tbl)", "(roots)"}));
}

TEST(RetentionProfileTest, ReadsBackInGoPprofWithDominatorStacks) {
  FATHOM_REQUIRE_TOOL("go");
  Analysis a(SessionsHeap().Build());
  RetentionProfileOptions options;
  options.time_nanos = 1700000000000000000;
  options.duration_nanos = 1500000000;
  options.comment = "fathom retention test";
  RetentionProfileStats stats;
  std::string gz = EncodeRetentionProfile(a.g, a.idom, a.retained, options, &stats);
  EXPECT_EQ(stats.objects, 10u);
  EXPECT_EQ(stats.samples, 9u);  // the two "[] (String)" under {c} share a sample
  EXPECT_EQ(gz, EncodeRetentionProfile(a.g, a.idom, a.retained, options));  // deterministic

  GoPprof pprof(gz);
  RawProfile raw = pprof.Raw();
  EXPECT_EQ(raw.header, "inuse_objects/count inuse_space/bytes[dflt] retained_space/bytes") << raw.output;
  EXPECT_NE(raw.output.find("PeriodType: space bytes"), std::string::npos) << raw.output;
  EXPECT_NE(raw.output.find("Period: 1\n"), std::string::npos) << raw.output;
  EXPECT_NE(raw.output.find("Comment: fathom retention test"), std::string::npos) << raw.output;
  EXPECT_NE(raw.output.find("Duration: 1.5s"), std::string::npos) << raw.output;

  const std::string root = "(root: global_tbl)", hash = "$sessions (Hash)";
  using V = std::vector<int64_t>;
  ASSERT_EQ(raw.samples.size(), 9u) << raw.output;
  EXPECT_EQ(raw.ValuesOf({root, hash}), (V{1, 100, 510})) << raw.output;
  EXPECT_EQ(raw.ValuesOf({root, hash, "{a} (Session)"}), (V{1, 40, 60}));
  EXPECT_EQ(raw.ValuesOf({root, hash, "{b} (Session)"}), (V{1, 40, 60}));
  EXPECT_EQ(raw.ValuesOf({root, hash, "{c} (Session)"}), (V{1, 40, 90}));
  EXPECT_EQ(raw.ValuesOf({root, hash, "{a} (Session)", "@token (String)"}), (V{1, 20, 20}));
  EXPECT_EQ(raw.ValuesOf({root, hash, "{b} (Session)", "@token (String)"}), (V{1, 20, 20}));
  EXPECT_EQ(raw.ValuesOf({root, hash, "{c} (Session)", "[] (String)"}), (V{2, 50, 50}));
  // The shared Config hangs off the hash, named by its path from there.
  EXPECT_EQ(raw.ValuesOf({root, hash, "{a} \u2192 @config (Config)"}), (V{1, 200, 200})) << raw.output;
  // Reachable from two categories: dominated by the super-root only, no category frame.
  EXPECT_EQ(raw.ValuesOf({"global_tbl \u2192 $w (Widget)"}), (V{1, 1000, 1000})) << raw.output;

  // inuse_space summed over every stack through the hash = its retained
  // size; total = everything.
  int64_t through_hash = 0, total = 0, objects = 0;
  for (const auto& s : raw.samples) {
    total += s.values[1];
    objects += s.values[0];
    if (s.frames.size() >= 2 && s.frames[1] == hash) through_hash += s.values[1];
  }
  EXPECT_EQ(through_hash, static_cast<int64_t>(a.retained[NodeOf(a.g, kHash)]));
  EXPECT_EQ(total, static_cast<int64_t>(a.retained[0]));
  EXPECT_EQ(objects, 10);

  // The same from pprof's own aggregation: cum at the hash = its retained
  // size, and retained_space read flat ranks by retained size.
  test_util::CommandResult top = pprof.Run("-top -symbolize=none -unit=B -sample_index=inuse_space");
  ASSERT_EQ(top.exit_code, 0) << top.output;
  EXPECT_NE(top.output.find("of 1510B total"), std::string::npos) << top.output;
  std::istringstream in(top.output);
  std::string line;
  std::map<std::string, std::pair<std::string, std::string>> rows;  // name -> (flat, cum)
  while (std::getline(in, line)) {
    std::istringstream row(line);
    std::string flat, flat_pct, sum_pct, cum, cum_pct, name;
    if (!(row >> flat >> flat_pct >> sum_pct >> cum >> cum_pct) || cum_pct.back() != '%') continue;
    std::getline(row >> std::ws, name);
    rows[name] = {flat, cum};
  }
  EXPECT_EQ(rows[hash], std::make_pair(std::string("100B"), std::string("510B"))) << top.output;
  EXPECT_EQ(rows[root], std::make_pair(std::string("0"), std::string("510B"))) << top.output;
  EXPECT_EQ(rows["{c} (Session)"], std::make_pair(std::string("40B"), std::string("90B"))) << top.output;
  test_util::CommandResult retained = pprof.Run("-top -symbolize=none -unit=B -sample_index=retained_space");
  ASSERT_EQ(retained.exit_code, 0) << retained.output;
  EXPECT_NE(retained.output.find("510B"), std::string::npos) << retained.output;
}

// A 10-object chain under "vm": with max_depth 5, stacks keep the 3 frames
// nearest the roots, a "(… N more)" frame, and the leaf.
TEST(RetentionProfileTest, DeepStacksAreCappedKeepingRootsAndLeaf) {
  FATHOM_REQUIRE_TOOL("go");
  HandHeap h;
  h.roots = {{"vm", {0x1000}}};
  for (uint64_t i = 1; i <= 10; i++) {
    std::vector<uint64_t> next;
    if (i < 10) next.push_back(0x1000 * (i + 1));
    h.objects[0x1000 * i] = {0x1000 * i, "@n" + std::to_string(i), "Node", i, next};
  }
  Analysis a(h.Build());
  RetentionProfileOptions options;
  options.max_depth = 5;
  RetentionProfileStats stats;
  std::string gz = EncodeRetentionProfile(a.g, a.idom, a.retained, options, &stats);
  EXPECT_EQ(stats.samples, 10u);
  RawProfile raw = GoPprof(gz).Raw();
  ASSERT_EQ(raw.samples.size(), 10u) << raw.output;
  auto n = [](int i) { return "@n" + std::to_string(i) + " (Node)"; };
  using V = std::vector<int64_t>;
  // Depth <= 5 (the category and 4 objects): whole.
  EXPECT_EQ(raw.ValuesOf({"(root: vm)", n(1), n(2), n(3), n(4)}), (V{1, 4, 49})) << raw.output;
  // Object 5 is frame 6: frames 4 and 5 elided.
  EXPECT_EQ(raw.ValuesOf({"(root: vm)", n(1), n(2), "(\u2026 2 more)", n(5)}), (V{1, 5, 45})) << raw.output;
  EXPECT_EQ(raw.ValuesOf({"(root: vm)", n(1), n(2), "(\u2026 7 more)", n(10)}), (V{1, 10, 10})) << raw.output;
  for (const auto& s : raw.samples) EXPECT_LE(s.frames.size(), 5u);

  // No cap.
  options.max_depth = 0;
  raw = GoPprof(EncodeRetentionProfile(a.g, a.idom, a.retained, options)).Raw();
  EXPECT_EQ(raw.ValuesOf({"(root: vm)", n(1), n(2), n(3), n(4), n(5), n(6), n(7), n(8), n(9), n(10)}),
            (V{1, 10, 10})) << raw.output;

  options.max_depth = 2;
  EXPECT_THROW(EncodeRetentionProfile(a.g, a.idom, a.retained, options), std::invalid_argument);
  options.max_depth = 64;
  options.gzip_level = 10;
  EXPECT_THROW(EncodeRetentionProfile(a.g, a.idom, a.retained, options), std::invalid_argument);
  options.gzip_level = 6;
  MappedVector<uint32_t> bad = a.idom;
  bad[5] = 7;  // a later node
  EXPECT_THROW(EncodeRetentionProfile(a.g, bad, a.retained, options), std::invalid_argument);
  EXPECT_THROW(EncodeRetentionProfile(a.g, a.idom, {}, options), std::invalid_argument);
}

// When an object's BFS parent is not its idom, its frame is named by the
// hops of the BFS tree path from the idom.
TEST(RetentionProfileTest, MultiHopFrameNames) {
  // vm -> a1 -> a2 -> a3 -> a4 -> a5 -> a6, and vm -> b -> a5. BFS reaches
  // a5 from b first; a5's idom is vm.
  HandHeap h;
  h.roots = {{"vm", {0x100, 0x900}}};
  for (uint64_t i = 1; i <= 6; i++)
    h.objects[0x100 * i] = {0x100 * i, i == 3 ? "" : "e" + std::to_string(i), "A", 1,
                            i < 6 ? std::vector<uint64_t>{0x100 * (i + 1)} : std::vector<uint64_t>{}};
  h.objects[0x900] = {0x900, "b", "", 1, {0x500}};
  Analysis a(h.Build());
  uint32_t a3 = NodeOf(a.g, 0x300), a4 = NodeOf(a.g, 0x400), a5 = NodeOf(a.g, 0x500), a6 = NodeOf(a.g, 0x600);
  EXPECT_EQ(a.g.tree_parent(a5), NodeOf(a.g, 0x900));
  EXPECT_EQ(a.idom[a5], 1u);
  EXPECT_EQ(FrameName(a.g, a.idom, a5), "b \u2192 e5 (A)");
  EXPECT_EQ(a.idom[a6], a5);
  EXPECT_EQ(FrameName(a.g, a.idom, a6), "e6 (A)");
  EXPECT_EQ(a.idom[a4], a3);
  EXPECT_EQ(FrameName(a.g, a.idom, a3), "(A)");  // unnamed edge
  EXPECT_EQ(FrameName(a.g, a.idom, NodeOf(a.g, 0x900)), "b (?)");  // unknown class

  // Roots in two categories: vm -> c1 -> ... -> c7 and machine_context ->
  // d -> c7. d is numbered right after c1, so c7 is first seen from d; its
  // idom is the super-root, and the category is one of the hops.
  HandHeap l;
  l.roots = {{"vm", {0x1000}}, {"machine_context", {0x9000}}};
  for (uint64_t i = 1; i <= 7; i++)
    l.objects[0x1000 * i] = {0x1000 * i, "c" + std::to_string(i), "C", 1,
                             i < 7 ? std::vector<uint64_t>{0x1000 * (i + 1)} : std::vector<uint64_t>{}};
  l.objects[0x9000] = {0x9000, "d", "D", 1, {0x7000}};
  Analysis b(l.Build());
  uint32_t c7 = NodeOf(b.g, 0x7000);
  EXPECT_EQ(b.g.tree_parent(c7), NodeOf(b.g, 0x9000));
  EXPECT_EQ(b.idom[c7], 0u);
  EXPECT_EQ(FrameName(b.g, b.idom, c7), "machine_context \u2192 d \u2192 c7 (C)");
}

// x1 -> x2 -> ... -> x10 (the BFS tree path) and x1 -> z0 -> ... -> z11 ->
// `join` (longer): join's idom is x1 and its frame lists the hops from x1.
HeapGraph TwoPathHeap(uint64_t join) {
  HandHeap h;
  h.roots = {{"vm", {0x100}}};
  for (uint64_t i = 1; i <= 10; i++) {
    std::vector<uint64_t> refs;
    if (i < 10) refs.push_back(0x100 * (i + 1));
    if (i == 1) refs.push_back(0x10000);
    h.objects[0x100 * i] = {0x100 * i, "x" + std::to_string(i), "X", 1, refs};
  }
  for (uint64_t k = 0; k < 12; k++) h.objects[0x10000 + k] = {0x10000 + k, "z", "Z", 1, {k < 11 ? 0x10000 + k + 1 : join}};
  return h.Build();
}

TEST(RetentionProfileTest, FrameNamesKeepTheLastEightHops) {
  Analysis nine(TwoPathHeap(0xA00));
  uint32_t x10 = NodeOf(nine.g, 0xA00);
  EXPECT_EQ(nine.idom[x10], NodeOf(nine.g, 0x100));
  EXPECT_EQ(nine.g.tree_parent(x10), NodeOf(nine.g, 0x900));
  const std::string truncated =
      "\u2026 \u2192 x3 \u2192 x4 \u2192 x5 \u2192 x6 \u2192 x7 \u2192 x8 \u2192 x9 \u2192 x10 (X)";
  EXPECT_EQ(FrameName(nine.g, nine.idom, x10), truncated);
  Analysis eight(TwoPathHeap(0x900));
  uint32_t x9 = NodeOf(eight.g, 0x900);
  EXPECT_EQ(eight.idom[x9], NodeOf(eight.g, 0x100));
  EXPECT_EQ(FrameName(eight.g, eight.idom, x9),
            "x2 \u2192 x3 \u2192 x4 \u2192 x5 \u2192 x6 \u2192 x7 \u2192 x8 \u2192 x9 (X)");

  // The profile uses the same names (and interns the hop paths: the
  // truncated one once).
  FATHOM_REQUIRE_TOOL("go");
  RawProfile raw = GoPprof(EncodeRetentionProfile(nine.g, nine.idom, nine.retained)).Raw();
  EXPECT_EQ(raw.ValuesOf({"(root: vm)", "x1 (X)", truncated}), (std::vector<int64_t>{1, 1, 1})) << raw.output;
}

// A linked list whose nodes all show as "@next (Node)": retained_space,
// read flat per frame name, charges the list once (at its outermost node),
// not once per node — summing every node's retained size made a 46 MB heap
// of lists "retain" 372 GB. Also when the stacks are capped, and the name
// first recurs beyond the cap.
TEST(RetentionProfileTest, RecurringFrameIsChargedOnceAtItsOutermostObject) {
  FATHOM_REQUIRE_TOOL("go");
  constexpr uint64_t kNodes = 50;
  HandHeap h;
  h.roots = {{"vm", {0x1000}}};
  h.objects[0x1000] = {0x1000, "@head", "List", 8, {0x2000}};
  for (uint64_t i = 0; i < kNodes; i++) {
    uint64_t node = 0x2000 + i * 0x10, value = 0x9000 + i * 0x10;
    std::vector<uint64_t> refs{value};
    if (i + 1 < kNodes) refs.push_back(node + 0x10);
    h.objects[node] = {node, i == 0 ? "@first" : "@next", "Node", 40, refs};
    h.objects[value] = {value, "@value", "String", 20, {}};
  }
  Analysis a(h.Build());
  const int64_t heap = 8 + kNodes * 60;
  ASSERT_EQ(a.retained[0], static_cast<uint64_t>(heap));
  for (uint32_t max_depth : {0u, 5u, 64u}) {
    RetentionProfileOptions options;
    options.max_depth = max_depth;
    RawProfile raw = GoPprof(EncodeRetentionProfile(a.g, a.idom, a.retained, options)).Raw();
    std::map<std::string, int64_t> flat;  // leaf frame -> summed retained_space
    int64_t space = 0;
    for (const auto& sample : raw.samples) {
      flat[sample.frames.back()] += sample.values[2];
      space += sample.values[1];
    }
    EXPECT_EQ(space, heap) << raw.output;
    EXPECT_EQ(flat["@head (List)"], heap) << "max_depth " << max_depth << "\n" << raw.output;
    EXPECT_EQ(flat["@first (Node)"], static_cast<int64_t>(kNodes * 60)) << max_depth;
    EXPECT_EQ(flat["@next (Node)"], static_cast<int64_t>((kNodes - 1) * 60)) << max_depth;
    EXPECT_EQ(flat["@value (String)"], static_cast<int64_t>(kNodes * 20)) << max_depth;
    for (const auto& [name, bytes] : flat) EXPECT_LE(bytes, heap) << name;
  }
}

// A heap walked as the Ruby walk does with roles: edges to the profiler's
// own objects through AddOwnEdgeTo, a thread's through AddDeferredEdgeTo,
// marked edges from own objects through AddProgramEdgeTo, internals marked.
struct RoleObj {
  std::string edge_name, klass;
  uint64_t size = 0;
  std::vector<uint64_t> refs;
  bool own = false;       // the profiler's: edges to it go through AddOwnEdgeTo
  bool internal = false;  // a runtime internal (an imemo that is not an env)
  bool stacks = false;    // a thread: its edges are deferred
  std::vector<uint64_t> program_refs;  // refs reached through AddProgramEdgeTo
};

struct RoleHeap {
  std::vector<std::pair<std::string, std::vector<uint64_t>>> roots;
  std::map<uint64_t, RoleObj> objects;
  size_t dropped = 0;

  void Add(HeapGraphBuilder& b, uint64_t from, uint64_t to) const {
    const RoleObj* src = from == 0 ? nullptr : &objects.at(from);
    if (objects.at(to).own) {
      b.AddOwnEdgeTo(to);
    } else if (src != nullptr && src->stacks) {
      b.AddDeferredEdgeTo(to, 0);
    } else if (src != nullptr &&
               std::find(src->program_refs.begin(), src->program_refs.end(), to) != src->program_refs.end()) {
      b.AddProgramEdgeTo(to);
    } else {
      b.AddEdgeTo(to);
    }
  }

  HeapGraph Build() {
    HeapGraphBuilder b;
    std::vector<uint32_t> cats;
    for (const auto& r : roots) cats.push_back(b.AddRootCategory(r.first));
    for (size_t i = 0; i < roots.size(); i++) {
      b.BeginEdgesOf(cats[i]);
      for (uint64_t a : roots[i].second) Add(b, 0, a);
    }
    for (uint32_t v = b.first_object_node();; v++) {
      if (v == b.node_count() && !b.DiscoverDeferred()) break;
      const RoleObj& o = objects.at(b.address(v));
      b.SetNodeInfo(v, b.InternName(o.klass), 0, o.size);
      if (o.internal) b.MarkInternal(v);
      b.BeginEdgesOf(v);
      for (uint64_t a : o.refs) Add(b, b.address(v), a);
    }
    dropped = b.dropped_own_edges();
    HeapGraph g = b.Finish();
    for (uint32_t v = g.first_object_node(); v < g.node_count(); v++) g.SetEdgeName(v, objects.at(g.address(v)).edge_name);
    return g;
  }
};

// The program keeps sessions in a constant, a callback proc with a
// captured local, and an App whose middleware chain runs through one of the
// profiler's own objects; the profiler (a module with a registry, a
// profiler object that a thread's stack also holds, a collector buffer, a
// block only it holds) also points at a session; a method entry and an
// iseq (internals) hold a literal and, like an inline cache, the sessions;
// two iseqs share a literal.
constexpr uint64_t kObject = 0x10, kSessions = 0x20, kSess = 0x30, kPayload = 0x40, kFathom = 0x50, kRegistry = 0x60,
                   kProfiler = 0x70, kCollector = 0x80, kBlock = 0x90, kBlockEnv = 0xa0, kFathomMent = 0xb0,
                   kMent = 0xc0, kIseq = 0xd0, kLiteral = 0xe0, kCallback = 0xf0, kEnv = 0x100, kRows = 0x110,
                   kApp = 0x120, kMiddleware = 0x130, kRouter = 0x140, kRoutes = 0x150, kThread = 0x160, kLocal = 0x170,
                   kIseq2 = 0x180, kShared = 0x190;

RoleObj R(std::string edge, std::string klass, uint64_t size, std::vector<uint64_t> refs, bool own = false,
          bool internal = false) {
  RoleObj o;
  o.edge_name = std::move(edge);
  o.klass = std::move(klass);
  o.size = size;
  o.refs = std::move(refs);
  o.own = own;
  o.internal = internal;
  return o;
}

RoleHeap ProfiledAppHeap() {
  RoleHeap h;
  h.roots = {{"vm", {kObject, kThread}}};
  auto& o = h.objects;
  o[kObject] = R("Object", "Class", 100, {kSessions, kFathom, kMent, kCallback, kApp, kIseq2});
  o[kSessions] = R("SESSIONS", "Hash", 50, {kSess});
  o[kSess] = R("$hashval", "Session", 40, {kPayload});
  o[kPayload] = R("@payload", "String", 1000, {});
  o[kFathom] = R("Fathom", "Module", 30, {kRegistry, kFathomMent}, true);
  o[kRegistry] = R("@profilers", "Hash", 20, {kProfiler});
  o[kProfiler] = R("{:heap}", "Fathom::HeapProfiler", 24, {kCollector, kSess, kBlock}, true);
  o[kCollector] = R("@collector", "Fathom::Native::HeapCollector", 5000, {}, true);
  o[kBlock] = R("@block", "Proc", 80, {kBlockEnv});
  o[kBlockEnv] = R("(captured)", "<imemo>", 60, {});
  o[kFathomMent] = R("via Module", "<imemo>", 70, {}, false, true);
  o[kMent] = R("via Class", "<imemo>", 200, {kIseq}, false, true);
  o[kIseq] = R("via <imemo>", "<imemo>", 300, {kLiteral, kSessions, kShared}, false, true);
  // A literal two iseqs share (an fstring): only internals lead to it, no
  // one of them dominates it.
  o[kIseq2] = R("via Class", "<imemo>", 110, {kShared}, false, true);
  o[kShared] = R("via <imemo>", "String", 25, {});
  o[kLiteral] = R("via <imemo>", "String", 50, {});
  o[kCallback] = R("CALLBACK", "Proc", 80, {kEnv, kIseq});
  o[kEnv] = R("(captured)", "<imemo>", 60, {kRows});  // an env: not internal
  o[kRows] = R("rows", "Array", 400, {});
  o[kApp] = R("APP", "App", 40, {kMiddleware});
  o[kMiddleware] = R("@app", "Fathom::Rack::Middleware", 40, {kRouter}, true);
  o[kMiddleware].program_refs = {kRouter};
  o[kRouter] = R("@app", "Router", 40, {kRoutes});
  o[kRoutes] = R("@routes", "Hash", 700, {});
  o[kThread] = R("thread \"main\"", "Thread", 500, {kProfiler, kLocal});
  o[kThread].stacks = true;
  o[kLocal] = R("via Thread", "Array", 90, {});
  return h;
}

TEST(RetentionRolesTest, ProfilerObjectsAreSetApartAndInternalsGetOneRow) {
  FATHOM_REQUIRE_TOOL("go");
  RoleHeap heap = ProfiledAppHeap();
  HeapGraph built = heap.Build();
  EXPECT_FALSE(built.is_internal(NodeOf(built, kShared)));
  EXPECT_FALSE(built.is_internal(NodeOf(built, kLiteral)));
  EXPECT_EQ(built.ExtendInternals(), 2u);  // the literals, not the sessions an iseq also holds
  Analysis a(std::move(built));
  const HeapGraph& g = a.g;
  auto node = [&](uint64_t addr) { return NodeOf(g, addr); };
  EXPECT_TRUE(g.is_internal(node(kShared)));
  EXPECT_EQ(a.idom[node(kShared)], node(kObject));

  // Roles: what only the profiler leads to is own (its block too), the
  // program's middleware chain behind its middleware is not; an own
  // method entry stays own.
  for (uint64_t addr : {kFathom, kRegistry, kProfiler, kCollector, kBlock, kBlockEnv, kFathomMent, kMiddleware})
    EXPECT_TRUE(g.is_own(node(addr))) << std::hex << addr;
  for (uint64_t addr : {kObject, kSessions, kSess, kPayload, kRouter, kRoutes, kCallback, kEnv, kThread, kLocal})
    EXPECT_FALSE(g.is_own(node(addr))) << std::hex << addr;
  for (uint64_t addr : {kMent, kIseq}) EXPECT_TRUE(g.is_internal(node(addr))) << std::hex << addr;
  EXPECT_FALSE(g.is_internal(node(kFathomMent)));  // own wins
  EXPECT_FALSE(g.is_internal(node(kEnv)));
  // Every own node comes after every node the program reaches without the
  // profiler: the profiler's objects never name the program's.
  EXPECT_GT(node(kFathom), node(kRows));
  EXPECT_GT(node(kProfiler), node(kLocal));
  EXPECT_EQ(g.tree_parent(node(kSess)), node(kSessions));
  EXPECT_EQ(g.tree_parent(node(kRouter)), node(kMiddleware));
  // The profiler's edge to the session was not stored: the hash alone
  // dominates it, as if the profiler did not exist.
  EXPECT_EQ(heap.dropped, 1u);
  EXPECT_EQ(a.idom[node(kSess)], node(kSessions));
  // The iseq's reference to the sessions (an inline cache) does not make
  // them internals: the class dominates both.
  EXPECT_EQ(a.idom[node(kSessions)], node(kObject));

  // Retained sizes count the program's objects only; the middleware passes
  // the router on to the App; the internals count among themselves.
  EXPECT_EQ(a.retained[node(kApp)], 40u + 40 + 700);
  EXPECT_EQ(a.retained[node(kMiddleware)], 40u + 700);
  EXPECT_EQ(a.retained[node(kSessions)], 50u + 40 + 1000);
  EXPECT_EQ(a.retained[node(kCallback)], 80u + 60 + 400);
  EXPECT_EQ(a.retained[node(kObject)], 100u + 1090 + 540 + 780);
  EXPECT_EQ(a.retained[node(kThread)], 500u + 90);
  EXPECT_EQ(a.retained[node(kIseq)], 300u + 50);
  EXPECT_EQ(a.retained[node(kMent)], 200u);
  EXPECT_EQ(a.retained[node(kShared)], 25u);
  EXPECT_EQ(a.retained[node(kCollector)], 0u);
  EXPECT_EQ(a.retained[0], 2510u + 590);

  RetentionProfileOptions options;
  options.more_comments = {"own comment"};
  RetentionProfileStats stats;
  std::string gz = EncodeRetentionProfile(g, a.idom, a.retained, options, &stats);
  EXPECT_EQ(stats.own_objects, 8u);
  EXPECT_EQ(stats.own_bytes, 30u + 20 + 24 + 5000 + 80 + 60 + 70 + 40);
  EXPECT_EQ(stats.internal_objects, 5u);
  EXPECT_EQ(stats.internal_bytes, 550u + 110 + 25);
  EXPECT_EQ(stats.objects, 12u + 5);

  GoPprof pprof(gz);
  RawProfile raw = pprof.Raw();
  EXPECT_NE(raw.output.find("Comment: own comment"), std::string::npos) << raw.output;
  using V = std::vector<int64_t>;
  const std::string internals = "Ruby internals: compiled code, method caches";
  EXPECT_EQ(raw.ValuesOf({internals}), (V{5, 685, 685})) << raw.output;
  const Strs object{"(root: vm)", "Object (Class)"};
  auto under = [&](Strs frames) {
    Strs s = object;
    s.insert(s.end(), frames.begin(), frames.end());
    return s;
  };
  EXPECT_EQ(raw.ValuesOf(under({"SESSIONS (Hash)", "$hashval (Session)", "@payload (String)"})), (V{1, 1000, 1000}));
  EXPECT_EQ(raw.ValuesOf(under({"CALLBACK (Proc)", "(captured) (<imemo>)", "rows (Array)"})), (V{1, 400, 400}));
  // Behind the profiler's middleware: its frame names the path, uncharged.
  EXPECT_EQ(raw.ValuesOf(under({"APP (App)", "@app (Fathom::Rack::Middleware)", "@app (Router)"})), (V{1, 40, 740}))
      << raw.output;
  EXPECT_EQ(raw.ValuesOf(under({"APP (App)", "@app (Fathom::Rack::Middleware)"})), V{}) << raw.output;
  int64_t total = 0, objects = 0;
  for (const auto& sample : raw.samples) {
    total += sample.values[1];
    objects += sample.values[0];
    // No sample is the profiler's own object, and only the router's path
    // passes through one.
    for (const std::string& f : sample.frames) {
      if (f.find("Fathom") == std::string::npos) continue;
      EXPECT_EQ(f, "@app (Fathom::Rack::Middleware)") << raw.output;
      EXPECT_NE(sample.frames.back(), f);
    }
    if (sample.frames.back().find("(<imemo>)") != std::string::npos) {
      EXPECT_EQ(sample.frames.back(), "(captured) (<imemo>)") << "only the env is the program's";
    }
  }
  EXPECT_EQ(total, 3100 + 685);
  EXPECT_EQ(objects, 12 + 5);

  // -top: the internals are one row, flat = cum, sorted among the others
  // by its size; the program's frames' cum leaves them out.
  test_util::CommandResult top = pprof.Run("-top -symbolize=none -unit=B");
  ASSERT_EQ(top.exit_code, 0) << top.output;
  EXPECT_NE(top.output.find("of 3785B total"), std::string::npos) << top.output;
  std::istringstream in(top.output);
  std::map<std::string, std::pair<std::string, std::string>> rows;
  for (std::string line; std::getline(in, line);) {
    std::istringstream row(line);
    std::string flat, flat_pct, sum_pct, cum, cum_pct, name;
    if (!(row >> flat >> flat_pct >> sum_pct >> cum >> cum_pct) || cum_pct.back() != '%') continue;
    std::getline(row >> std::ws, name);
    rows[name] = {flat, cum};
  }
  EXPECT_EQ(rows[internals], std::make_pair(std::string("685B"), std::string("685B"))) << top.output;
  EXPECT_EQ(rows["Object (Class)"], std::make_pair(std::string("100B"), std::string("2510B"))) << top.output;
  EXPECT_EQ(rows.count("Fathom (Module)"), 0u) << top.output;
}

// Random heaps with random objects of the profiler's own and random
// internals: the graph must be the program's heap as if the profiler did
// not hold anything, plus its own objects hanging off it. Reference: P =
// the objects the roots reach without entering an own object; every other
// reachable object is own; the dominators are those of the heap without
// the edges from own objects to P. Internals (after ExtendInternals): the
// marked objects of P and those of P that the roots reach only through
// them. A retained size counts the non-own objects of its own group
// (internals or not) that it dominates.
TEST(RetentionRolesTest, OwnObjectsAreChargedAsIfTheProfilerWereAbsent) {
  std::mt19937 rng(2025);
  for (int iter = 0; iter < 300; iter++) {
    const uint32_t m = 2 + rng() % 30;
    std::vector<std::vector<uint32_t>> out(m);
    std::vector<uint64_t> size(m);
    std::vector<bool> own(m), internal(m);
    for (uint32_t o = 0; o < m; o++) {
      uint32_t k = rng() % 4;
      for (uint32_t i = 0; i < k; i++) out[o].push_back(rng() % m);
      size[o] = 1 + rng() % 100;
      own[o] = rng() % 4 == 0;
      internal[o] = iter % 2 == 1 && rng() % 5 == 0;
    }
    std::vector<uint32_t> roots;
    for (uint32_t i = 0, r = 1 + rng() % 3; i < r; i++) roots.push_back(rng() % m);

    // Reference: nodes 0 = root, 1 + o = object o.
    auto reach = [&](bool enter_own, const std::vector<bool>* removed_edges_from) {
      std::vector<bool> seen(m, false);
      std::vector<uint32_t> queue;
      for (uint32_t r : roots)
        if ((enter_own || !own[r]) && !seen[r]) seen[r] = true, queue.push_back(r);
      for (size_t i = 0; i < queue.size(); i++) {
        uint32_t o = queue[i];
        for (uint32_t t : out[o]) {
          if (seen[t] || (!enter_own && own[t])) continue;
          if (removed_edges_from && (*removed_edges_from)[o]) continue;
          seen[t] = true;
          queue.push_back(t);
        }
      }
      return seen;
    };
    std::vector<bool> program = reach(false, nullptr);
    std::vector<bool> reachable = reach(true, nullptr);
    // The reference graph: edges from non-program objects into P dropped.
    auto edge_kept = [&](uint32_t o, uint32_t t) { return program[o] || !program[t]; };
    // Dominators by removal, over the reference graph.
    auto reach_without = [&](int32_t removed) {
      std::vector<bool> seen(m, false);
      std::vector<uint32_t> queue;
      for (uint32_t r : roots)
        if (static_cast<int32_t>(r) != removed && !seen[r]) seen[r] = true, queue.push_back(r);
      for (size_t i = 0; i < queue.size(); i++)
        for (uint32_t t : out[queue[i]])
          if (!seen[t] && static_cast<int32_t>(t) != removed && edge_kept(queue[i], t)) seen[t] = true, queue.push_back(t);
      return seen;
    };
    std::vector<std::vector<bool>> dominated(m);  // dominated[d][v]: d strictly dominates v
    for (uint32_t d = 0; d < m; d++) {
      std::vector<bool> seen = reach_without(static_cast<int32_t>(d));
      dominated[d].assign(m, false);
      for (uint32_t v = 0; v < m; v++) dominated[d][v] = reachable[v] && v != d && !seen[v];
    }
    // Internals: reached from the roots without entering one of P's marked
    // objects (own ones may be passed through), over the reference graph.
    std::vector<bool> plain(m, false);
    {
      std::vector<uint32_t> queue;
      auto enters = [&](uint32_t t) { return !plain[t] && !(internal[t] && program[t]); };
      for (uint32_t r : roots)
        if (enters(r)) plain[r] = true, queue.push_back(r);
      for (size_t i = 0; i < queue.size(); i++)
        for (uint32_t t : out[queue[i]])
          if (edge_kept(queue[i], t) && enters(t)) plain[t] = true, queue.push_back(t);
    }
    std::vector<bool> want_internal(m);
    for (uint32_t o = 0; o < m; o++) want_internal[o] = reachable[o] && program[o] && (internal[o] || !plain[o]);
    std::vector<int64_t> want_idom(m, -1);  // -1: only virtual nodes dominate it
    std::vector<uint64_t> want_retained(m, 0);
    for (uint32_t v = 0; v < m; v++) {
      if (!reachable[v]) continue;
      size_t best = 0;
      for (uint32_t d = 0; d < m; d++) {
        if (!dominated[d][v]) continue;
        size_t c = 0;
        for (uint32_t x = 0; x < m; x++) c += dominated[x][d];
        if (want_idom[v] < 0 || c >= best) want_idom[v] = d, best = c;
      }
      want_retained[v] = program[v] ? size[v] : 0;
      for (uint32_t u = 0; u < m; u++)
        if (dominated[v][u] && program[u] && want_internal[u] == want_internal[v]) want_retained[v] += size[u];
    }

    HeapGraphBuilder b;
    auto add = [&](uint32_t t) {
      if (own[t])
        b.AddOwnEdgeTo(0x1000 + 8 * uint64_t{t});
      else
        b.AddEdgeTo(0x1000 + 8 * uint64_t{t});
    };
    b.AddRootCategory("vm");
    b.BeginEdgesOf(1);
    for (uint32_t r : roots) add(r);
    for (uint32_t v = b.first_object_node();; v++) {
      if (v == b.node_count() && !b.DiscoverDeferred()) break;
      uint32_t o = static_cast<uint32_t>((b.address(v) - 0x1000) / 8);
      b.SetNodeInfo(v, 0, 0, size[o]);
      if (internal[o]) b.MarkInternal(v);
      b.BeginEdgesOf(v);
      for (uint32_t t : out[o]) add(t);
    }
    HeapGraph g = b.Finish();
    g.ExtendInternals();
    MappedVector<uint32_t> idom = ComputeDominators(g);
    MappedVector<uint64_t> retained = RetainedSizes(g, idom);
    auto obj = [&](uint32_t v) { return static_cast<uint32_t>((g.address(v) - 0x1000) / 8); };
    size_t nodes = 0;
    for (uint32_t v = g.first_object_node(); v < g.node_count(); v++) {
      uint32_t o = obj(v);
      nodes++;
      ASSERT_TRUE(reachable[o]);
      ASSERT_EQ(g.is_own(v), !program[o]) << "iter " << iter << " object " << o;
      ASSERT_EQ(g.is_internal(v), want_internal[o]) << "iter " << iter << " object " << o;
      ASSERT_LT(idom[v], v);
      int64_t got = g.is_virtual(idom[v]) ? -1 : static_cast<int64_t>(obj(idom[v]));
      ASSERT_EQ(got, want_idom[o]) << "iter " << iter << " object " << o;
      ASSERT_EQ(retained[v], want_retained[o]) << "iter " << iter << " object " << o;
      if (!g.is_own(v)) {
        for (uint32_t p = g.tree_parent(v); !g.is_virtual(p); p = g.tree_parent(p))
          ASSERT_FALSE(g.is_own(p)) << "a program object named through the profiler's";
      }
    }
    ASSERT_EQ(nodes, static_cast<size_t>(std::count(reachable.begin(), reachable.end(), true)));
  }
}

// A 1M-long linked list: the dominator tree is 1M deep. Capped stacks keep
// the output small: the elided counts are bucketed above 15.
TEST(RetentionProfileTest, MillionDeepListEncodesToFewSamples) {
  const uint32_t n = 1000000;
  HeapGraphBuilder b;
  b.Reserve(n, n);
  uint32_t cat = b.AddRootCategory("global_tbl");
  b.BeginEdgesOf(cat);
  b.AddEdgeTo(0x10);
  uint32_t klass = b.InternName("Node");
  for (uint32_t v = b.first_object_node(); v < b.node_count(); v++) {
    b.SetNodeInfo(v, klass, 0, 40);
    b.BeginEdgesOf(v);
    uint64_t addr = b.address(v);
    if (addr / 0x10 < n) b.AddEdgeTo(addr + 0x10);
  }
  HeapGraph g = b.Finish();
  ASSERT_EQ(g.node_count(), n + 2);
  uint32_t next = g.InternName("@next");
  for (uint32_t v = g.first_object_node() + 1; v < g.node_count(); v++) g.SetEdgeName(v, next);
  MappedVector<uint32_t> idom = ComputeDominators(g);
  MappedVector<uint64_t> retained = RetainedSizes(g, idom);
  EXPECT_EQ(retained[g.first_object_node()], uint64_t{n} * 40);
  RetentionProfileStats stats;
  std::string gz = EncodeRetentionProfile(g, idom, retained, {}, &stats);
  EXPECT_EQ(stats.objects, n);
  EXPECT_LT(stats.samples, 100u);
  EXPECT_LT(gz.size(), 100000u);
  std::vector<uint32_t> path = DominatorPath(idom, n + 1);
  EXPECT_EQ(path.size(), n + 2);
}

// The end-to-end cost at the target size: 1M objects, ~2.5M edges, fed
// through the builder as the Ruby walker would, named, analysed, encoded.
// Prints timings (no assertion on them) and memory per node.
TEST(RetentionProfileTest, MillionObjectHeapEndToEnd) {
  const uint32_t n = 1000000, kClasses = 50;
  std::mt19937 rng(2024);
  // The heap, by object id: objects 0..49 are classes (every object
  // references its class); each object also gets a parent among the
  // previous 1000 ids (so all are reachable, trees are deep-ish) and on
  // average 0.5 more random references.
  std::vector<uint32_t> begin(n + 1, 0), target;
  {
    std::vector<std::vector<uint32_t>> extra(n);
    for (uint32_t v = kClasses; v < n; v++) extra[v - 1 - rng() % std::min<uint32_t>(v, 1000)].push_back(v);
    for (uint32_t k = 0; k < n / 2; k++) extra[rng() % n].push_back(rng() % n);
    target.reserve(n * 5 / 2);
    for (uint32_t v = 0; v < n; v++) {
      begin[v] = static_cast<uint32_t>(target.size());
      target.push_back(v % kClasses);
      target.insert(target.end(), extra[v].begin(), extra[v].end());
    }
    begin[n] = static_cast<uint32_t>(target.size());
  }
  auto addr = [](uint32_t id) { return 0x7f0000000000ull + uint64_t{id} * 40; };
  std::vector<std::string> class_names;
  for (uint32_t c = 0; c < kClasses; c++) class_names.push_back("Class" + std::to_string(c));

  using Clock = std::chrono::steady_clock;
  auto ms = [](Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double, std::milli>(b - a).count(); };
  auto t0 = Clock::now();
  HeapGraphBuilder b;
  b.Reserve(n, 3 * n);  // the walker knows the object count (ObjectSpace.count_objects), not the edges
  std::vector<uint32_t> class_ids;  // cached per class, as the Ruby side should
  for (const std::string& c : class_names) class_ids.push_back(b.InternName(c));
  uint32_t vm = b.AddRootCategory("vm"), globals = b.AddRootCategory("global_tbl");
  b.BeginEdgesOf(vm);
  for (uint32_t c = 0; c < kClasses; c++) b.AddEdgeTo(addr(c));
  b.BeginEdgesOf(globals);
  for (int k = 0; k < 100; k++) b.AddEdgeTo(addr(rng() % n));
  for (uint32_t v = b.first_object_node(); v < b.node_count(); v++) {
    uint32_t id = static_cast<uint32_t>((b.address(v) - addr(0)) / 40);
    b.SetNodeInfo(v, class_ids[id % kClasses], 1, 40 + (id % 7) * 8);
    b.BeginEdgesOf(v);
    for (uint32_t e = begin[id]; e < begin[id + 1]; e++) b.AddEdgeTo(addr(target[e]));
  }
  size_t builder_bytes = b.MemoryBytes();
  HeapGraph g = b.Finish();
  auto t1 = Clock::now();
  // Edge names, per parent in edge order (ordinal 0 is the class reference).
  std::vector<uint32_t> ordinal_names;
  for (int k = 0; k < 12; k++) ordinal_names.push_back(g.InternName(k == 0 ? "klass" : "[" + std::to_string(k - 1) + "]"));
  for (uint32_t v = 0; v < g.node_count(); v++)
    g.ForEachTreeChild(v, [&](uint32_t ordinal, uint32_t child) {
      if (!g.is_virtual(v)) g.SetEdgeName(child, ordinal_names[std::min<uint32_t>(ordinal, 11)]);
    });
  auto t2 = Clock::now();
  DominatorStats dstats;
  MappedVector<uint32_t> idom = ComputeDominators(g, &dstats);
  auto t3 = Clock::now();
  MappedVector<uint64_t> retained = RetainedSizes(g, idom);
  auto t4 = Clock::now();
  size_t graph_bytes = g.MemoryBytes();
  g.ReleaseEdges();  // as the Ruby side can once edges are named and dominators known
  size_t graph_nodes_bytes = g.MemoryBytes();
  RetentionProfileStats rstats;
  std::string gz = EncodeRetentionProfile(g, idom, retained, {}, &rstats);
  auto t5 = Clock::now();

  uint32_t nodes = g.node_count();
  ASSERT_EQ(nodes, n + 3);
  EXPECT_EQ(rstats.objects, n);
  uint64_t total = 0;
  for (uint32_t v = 0; v < nodes; v++) total += g.self_size(v);
  EXPECT_EQ(retained[0], total);
  for (uint32_t v = 1; v < nodes; v++) ASSERT_LT(idom[v], v);

  double per = static_cast<double>(nodes);
  std::cout << "[ timing   ] 1M objects, " << target.size() << " edges\n"
            << "[ timing   ]   build " << ms(t0, t1) << " ms, name edges " << ms(t1, t2) << " ms, dominators "
            << ms(t2, t3) << " ms, retained " << ms(t3, t4) << " ms, encode " << ms(t4, t5) << " ms; total "
            << ms(t0, t5) << " ms\n"
            << "[ memory   ]   bytes/node: builder peak " << builder_bytes / per << "; graph " << graph_bytes / per
            << " + dominators working set " << dstats.peak_bytes / per << " = "
            << (graph_bytes + dstats.peak_bytes) / per << "; encoding: graph without edges "
            << graph_nodes_bytes / per << " + idom 4 + retained 8 + encoder tables " << rstats.peak_bytes / per
            << " = " << (graph_nodes_bytes + 12 * per + rstats.peak_bytes) / per << "\n"
            << "[ memory   ]   " << rstats.samples << " samples, " << rstats.stacks << " stacks, " << rstats.locations
            << " locations, " << gz.size() << " bytes gzipped\n";
}

}  // namespace
}  // namespace fathom
