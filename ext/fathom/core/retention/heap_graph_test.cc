#include "retention/heap_graph.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <queue>
#include <random>
#include <stdexcept>
#include <utility>
#include <vector>

namespace fathom {
namespace {

using Edges = std::vector<uint32_t>;

std::vector<uint32_t> Targets(const HeapGraph& g, uint32_t node) {
  std::vector<uint32_t> out;
  for (uint32_t e = g.edge_begin(node); e < g.edge_end(node); e++) out.push_back(g.edge_target(e));
  return out;
}

// A small heap:   vm -> A, B;  global_tbl -> C, A
//   A -> B, D, D, A(self);  B -> E;  C -> A;  D -> (none);  E -> F, B
// Addresses are 0x1000 * letter.
constexpr uint64_t kA = 0x1000, kB = 0x2000, kC = 0x3000, kD = 0x4000, kE = 0x5000, kF = 0x6000;

struct Walk {
  std::map<uint64_t, std::vector<uint64_t>> children{
      {kA, {kB, kD, kD, kA}}, {kB, {kE}}, {kC, {kA}}, {kD, {}}, {kE, {kF, kB}}, {kF, {}}};

  HeapGraph Build() {
    HeapGraphBuilder b;
    uint32_t vm = b.AddRootCategory("vm");
    uint32_t globals = b.AddRootCategory("global_tbl");
    EXPECT_EQ(vm, 1u);
    EXPECT_EQ(globals, 2u);
    EXPECT_EQ(b.AddRootCategory("vm"), vm);  // same name, same node
    b.BeginEdgesOf(vm);
    EXPECT_EQ(b.AddEdgeTo(kA), 3u);
    EXPECT_EQ(b.AddEdgeTo(kB), 4u);
    b.BeginEdgesOf(globals);
    EXPECT_EQ(b.AddEdgeTo(kC), 5u);
    EXPECT_EQ(b.AddEdgeTo(kA), 3u);  // seen: same node
    uint32_t klass = b.InternName("Thing");
    for (uint32_t i = b.first_object_node(); i < b.node_count(); i++) {
      uint64_t addr = b.address(i);
      b.SetNodeInfo(i, klass, static_cast<uint8_t>(i), addr / 0x100);
      b.BeginEdgesOf(i);
      for (uint64_t c : children.at(addr)) b.AddEdgeTo(c);
    }
    return b.Finish();
  }
};

TEST(HeapGraphTest, NodesAreNumberedBreadthFirstWithFirstReferrerAsParent) {
  HeapGraph g = Walk().Build();
  ASSERT_EQ(g.node_count(), 9u);  // super-root, 2 categories, A..F
  EXPECT_EQ(g.category_count(), 2u);
  EXPECT_EQ(g.first_object_node(), 3u);
  // Discovery order: A, B (from vm), C (from global_tbl), D (from A), E (from B), F (from E).
  std::vector<uint64_t> addresses;
  for (uint32_t v = 0; v < g.node_count(); v++) addresses.push_back(g.address(v));
  EXPECT_EQ(addresses, (std::vector<uint64_t>{0, 0, 0, kA, kB, kC, kD, kE, kF}));
  std::vector<uint32_t> parents;
  for (uint32_t v = 0; v < g.node_count(); v++) parents.push_back(g.tree_parent(v));
  EXPECT_EQ(parents, (std::vector<uint32_t>{0, 0, 0, 1, 1, 2, 3, 4, 7}));
  for (uint32_t v = 1; v < g.node_count(); v++) EXPECT_LT(g.tree_parent(v), v);
  EXPECT_TRUE(g.is_virtual(0));
  EXPECT_TRUE(g.is_category(2));
  EXPECT_FALSE(g.is_category(3));
  EXPECT_FALSE(g.is_virtual(3));
}

TEST(HeapGraphTest, CsrKeepsEveryEdgeInOrderWithDuplicatesAndSelfEdges) {
  HeapGraph g = Walk().Build();
  EXPECT_EQ(Targets(g, 0), (Edges{1, 2}));
  EXPECT_EQ(Targets(g, 1), (Edges{3, 4}));
  EXPECT_EQ(Targets(g, 2), (Edges{5, 3}));
  EXPECT_EQ(Targets(g, 3), (Edges{4, 6, 6, 3}));  // A -> B, D, D, A
  EXPECT_EQ(Targets(g, 4), (Edges{7}));
  EXPECT_EQ(Targets(g, 5), (Edges{3}));
  EXPECT_EQ(Targets(g, 6), (Edges{}));
  EXPECT_EQ(Targets(g, 7), (Edges{8, 4}));
  EXPECT_EQ(Targets(g, 8), (Edges{}));
  EXPECT_EQ(g.edge_count(), 14u);
  EXPECT_EQ(g.edge_end(8), g.edge_count());

  // The raw view agrees once masked.
  CsrGraphView csr = g.csr();
  ASSERT_EQ(csr.node_count, 9u);
  EXPECT_EQ(csr.edge_begin[0], 0u);
  EXPECT_EQ(csr.edge_begin[9], 14u);
  for (uint32_t e = 0; e < g.edge_count(); e++) EXPECT_EQ(csr.edge_target[e] & csr.target_mask, g.edge_target(e));
}

TEST(HeapGraphTest, TreeEdgesAndTheirOrdinals) {
  HeapGraph g = Walk().Build();
  // Exactly one tree edge per non-root node, from its tree parent.
  std::vector<int> tree_edges(g.node_count(), 0);
  for (uint32_t v = 0; v < g.node_count(); v++)
    for (uint32_t e = g.edge_begin(v); e < g.edge_end(v); e++)
      if (g.is_tree_edge(e)) {
        tree_edges[g.edge_target(e)]++;
        EXPECT_EQ(g.tree_parent(g.edge_target(e)), v);
      }
  EXPECT_EQ(tree_edges[0], 0);
  for (uint32_t v = 1; v < g.node_count(); v++) EXPECT_EQ(tree_edges[v], 1) << v;

  std::vector<std::pair<uint32_t, uint32_t>> children;
  g.ForEachTreeChild(3, [&](uint32_t ordinal, uint32_t child) { children.emplace_back(ordinal, child); });
  EXPECT_EQ(children, (std::vector<std::pair<uint32_t, uint32_t>>{{1, 6}}));  // A's tree child: D only
  children.clear();
  g.ForEachTreeChild(2, [&](uint32_t ordinal, uint32_t child) { children.emplace_back(ordinal, child); });
  EXPECT_EQ(children, (std::vector<std::pair<uint32_t, uint32_t>>{{0, 5}}));  // C; A was vm's
}

TEST(HeapGraphTest, NodeInfoNamesAndEdgeNames) {
  HeapGraph g = Walk().Build();
  EXPECT_EQ(g.name(g.class_name(3)), "Thing");
  EXPECT_EQ(g.class_name(0), 0u);
  EXPECT_EQ(g.class_name(1), 0u);
  EXPECT_EQ(g.type(5), 5u);
  EXPECT_EQ(g.self_size(3), kA / 0x100);
  EXPECT_EQ(g.self_size(0), 0u);
  // Categories are named by their edge from the super-root; objects start unnamed.
  EXPECT_EQ(g.name(g.edge_name(1)), "vm");
  EXPECT_EQ(g.name(g.edge_name(2)), "global_tbl");
  EXPECT_EQ(g.edge_name(0), 0u);
  EXPECT_EQ(g.edge_name(3), 0u);
  EXPECT_EQ(g.name(0), "");

  uint32_t at_foo = g.InternName("@foo");
  g.SetEdgeName(6, at_foo);
  g.SetEdgeName(8, "[0]");
  EXPECT_EQ(g.edge_name(6), at_foo);
  EXPECT_EQ(g.name(g.edge_name(8)), "[0]");
  EXPECT_EQ(g.InternName("[0]"), g.edge_name(8));
  EXPECT_EQ(g.InternName("Thing"), g.class_name(4));  // one table for all names
}

TEST(HeapGraphTest, ReleaseEdgesKeepsNodeData) {
  HeapGraph g = Walk().Build();
  g.SetEdgeName(6, "@d");
  size_t before = g.MemoryBytes();
  EXPECT_TRUE(g.has_edges());
  g.ReleaseEdges();
  EXPECT_FALSE(g.has_edges());
  EXPECT_EQ(g.edge_count(), 0u);
  EXPECT_LE(g.MemoryBytes(), before - (9 + 1 + 14) * sizeof(uint32_t));
  EXPECT_EQ(g.node_count(), 9u);
  EXPECT_EQ(g.tree_parent(8), 7u);
  EXPECT_EQ(g.address(8), kF);
  EXPECT_EQ(g.name(g.edge_name(6)), "@d");
  int calls = 0;
  g.ForEachTreeChild(3, [&](uint32_t, uint32_t) { calls++; });
  EXPECT_EQ(calls, 0);
}

TEST(HeapGraphTest, HugeSelfSizesSurvive) {
  HeapGraphBuilder b;
  uint32_t c = b.AddRootCategory("vm");
  b.BeginEdgesOf(c);
  uint32_t big = b.AddEdgeTo(0x10);
  uint32_t edge = b.AddEdgeTo(0x20);
  uint32_t small = b.AddEdgeTo(0x30);
  b.SetNodeInfo(big, 0, 0, 5ull << 32);
  b.SetNodeInfo(edge, 0, 0, UINT32_MAX);  // the sentinel value itself
  b.SetNodeInfo(small, 0, 0, 7ull << 32);
  b.SetNodeInfo(small, 0, 0, 12);  // set again: the side entry goes away
  HeapGraph g = b.Finish();
  EXPECT_EQ(g.self_size(big), 5ull << 32);
  EXPECT_EQ(g.self_size(edge), uint64_t{UINT32_MAX});
  EXPECT_EQ(g.self_size(small), 12u);
}

TEST(HeapGraphTest, SkippedNodesGetEmptyEdgeLists) {
  HeapGraphBuilder b;
  uint32_t c = b.AddRootCategory("vm");
  b.BeginEdgesOf(c);
  uint32_t x = b.AddEdgeTo(0x10), y = b.AddEdgeTo(0x20), z = b.AddEdgeTo(0x30);
  b.BeginEdgesOf(z);  // x and y skipped
  b.AddEdgeTo(0x10);
  HeapGraph g = b.Finish();
  EXPECT_EQ(Targets(g, x), (Edges{}));
  EXPECT_EQ(Targets(g, y), (Edges{}));
  EXPECT_EQ(Targets(g, z), (Edges{x}));
}

// machine_context -> C (depth 1) -> A, but A also hangs at depth 2 under a
// precise root (vm -> B -> A). Deferred edges are resolved only once the
// precise walk is done, so A's tree parent is B and only what no precise
// root holds (C, then E) comes from the conservative root.
TEST(HeapGraphTest, DeferredEdgesNameObjectsByPrecisePathsFirst) {
  std::map<uint64_t, std::vector<uint64_t>> children{{kA, {kD}}, {kB, {kA}}, {kC, {kA, kE}}, {kD, {}}, {kE, {}}};
  HeapGraphBuilder b;
  uint32_t machine = b.AddRootCategory("machine_context");
  uint32_t vm = b.AddRootCategory("vm");
  b.BeginEdgesOf(machine);
  b.AddDeferredEdgeTo(kC);
  b.AddDeferredEdgeTo(kB);  // also a precise root: stays a plain edge
  b.BeginEdgesOf(vm);
  EXPECT_EQ(b.AddEdgeTo(kB), 3u);
  uint32_t i = b.first_object_node();
  for (;; i++) {
    if (i == b.node_count() && !b.DiscoverDeferred()) break;
    b.BeginEdgesOf(i);
    for (uint64_t c : children.at(b.address(i))) b.AddEdgeTo(c);
  }
  HeapGraph g = b.Finish();
  ASSERT_EQ(g.node_count(), 8u);  // super-root, 2 categories, B A D C E
  auto node = [&](uint64_t addr) {
    for (uint32_t n = g.first_object_node(); n < g.node_count(); n++)
      if (g.address(n) == addr) return n;
    return HeapGraph::kSuperRoot;
  };
  EXPECT_EQ(g.tree_parent(node(kA)), node(kB));
  EXPECT_EQ(g.tree_parent(node(kB)), vm);
  EXPECT_EQ(g.tree_parent(node(kC)), machine);
  EXPECT_EQ(g.tree_parent(node(kE)), node(kC));
  EXPECT_GT(node(kC), node(kD));  // numbered after the precise walk
  // The conservative root's edges kept their order and their place.
  EXPECT_EQ(Targets(g, machine), (Edges{node(kC), node(kB)}));
  EXPECT_TRUE(g.is_tree_edge(g.edge_begin(machine)));
  EXPECT_FALSE(g.is_tree_edge(g.edge_begin(machine) + 1));
  for (uint32_t n = g.first_object_node(); n < g.node_count(); n++) EXPECT_LT(g.tree_parent(n), n);
}

// Two kinds of deferred holders, as the Ruby walk has them: thread stacks
// (tier 0) and the conservative machine_context (tier 1).
//   vm -> T (a thread) -> A, H ; vm -> K -> M -> A ; machine_context -> A, S
//   S -> H
// A is reachable from all three; it is named by the precise path (through
// K and M, deeper than T -> A). H hangs under the thread and under S, which
// only the C stack holds: the thread's tier comes first, so H is named
// through T. S itself has only the conservative root. The machine_context
// edges, added first, are resolved last.
TEST(HeapGraphTest, DeferredTiersResolveLowestFirst) {
  constexpr uint64_t kT = 0x7000, kK = 0x8000, kM = 0x9000, kS = 0xa000, kH = 0xb000;
  std::map<uint64_t, std::vector<uint64_t>> children{{kT, {kA, kH}}, {kK, {kM}}, {kM, {kA}}, {kA, {}},
                                                     {kS, {kH}},     {kH, {}}};
  HeapGraphBuilder b;
  uint32_t vm = b.AddRootCategory("vm");
  uint32_t machine = b.AddRootCategory("machine_context");
  b.BeginEdgesOf(vm);
  b.AddEdgeTo(kT);
  b.AddEdgeTo(kK);
  b.BeginEdgesOf(machine);
  b.AddDeferredEdgeTo(kA, 1);
  b.AddDeferredEdgeTo(kS, 1);
  EXPECT_THROW(b.AddDeferredEdgeTo(kS, HeapGraphBuilder::kDeferredTiers), std::logic_error);
  for (uint32_t i = b.first_object_node();; i++) {
    if (i == b.node_count() && !b.DiscoverDeferred()) break;
    b.BeginEdgesOf(i);
    bool thread = b.address(i) == kT;
    for (uint64_t c : children.at(b.address(i))) thread ? b.AddDeferredEdgeTo(c, 0) : (void)b.AddEdgeTo(c);
  }
  EXPECT_EQ(b.pending_deferred(), 0u);
  HeapGraph g = b.Finish();
  ASSERT_EQ(g.node_count(), 9u);  // super-root, 2 categories, T K M A H S
  auto node = [&](uint64_t addr) {
    for (uint32_t n = g.first_object_node(); n < g.node_count(); n++)
      if (g.address(n) == addr) return n;
    return HeapGraph::kSuperRoot;
  };
  EXPECT_EQ(g.tree_parent(node(kA)), node(kM));
  EXPECT_EQ(g.tree_parent(node(kH)), node(kT));
  EXPECT_EQ(g.tree_parent(node(kS)), machine);
  EXPECT_LT(node(kH), node(kS));  // the thread's tier was walked first
  EXPECT_EQ(Targets(g, node(kT)), (Edges{node(kA), node(kH)}));
  EXPECT_EQ(Targets(g, machine), (Edges{node(kA), node(kS)}));
  // Which roots hold A and S themselves, whatever path names them.
  EXPECT_EQ(g.RootCategoriesHolding(node(kA)), (Edges{machine}));
  EXPECT_EQ(g.RootCategoriesHolding(node(kT)), (Edges{vm}));
  EXPECT_EQ(g.RootCategoriesHolding(node(kH)), (Edges{}));
  EXPECT_THROW(g.RootCategoriesHolding(g.node_count()), std::out_of_range);
  for (uint32_t n = g.first_object_node(); n < g.node_count(); n++) EXPECT_LT(g.tree_parent(n), n);
  g.ReleaseEdges();
  EXPECT_THROW(g.RootCategoriesHolding(node(kA)), std::logic_error);
}

TEST(HeapGraphTest, FinishRefusesUnresolvedDeferredEdges) {
  HeapGraphBuilder b;
  uint32_t machine = b.AddRootCategory("machine_context");
  b.BeginEdgesOf(machine);
  b.AddDeferredEdgeTo(kA);
  EXPECT_THROW(b.Finish(), std::logic_error);
}

// GC.stat(:heap_live_slots) wrapped around to ~1.8e19 after Ractors ran on
// Ruby 3.1, and went straight into Reserve: a hint must never throw.
TEST(HeapGraphTest, ReserveIsOnlyAHint) {
  HeapGraphBuilder b;
  EXPECT_NO_THROW(b.Reserve(SIZE_MAX, SIZE_MAX));
  uint32_t vm = b.AddRootCategory("vm");
  b.BeginEdgesOf(vm);
  EXPECT_EQ(b.AddEdgeTo(kA), 2u);
  EXPECT_EQ(b.Finish().node_count(), 3u);
}

TEST(HeapGraphTest, MisuseThrows) {
  HeapGraphBuilder b;
  EXPECT_THROW(b.AddEdgeTo(0x10), std::logic_error);  // no current node
  EXPECT_THROW(b.BeginEdgesOf(0), std::logic_error);  // the super-root's edges are implicit
  uint32_t c = b.AddRootCategory("vm");
  EXPECT_THROW(b.BeginEdgesOf(c + 1), std::logic_error);  // unknown node
  b.BeginEdgesOf(c);
  EXPECT_THROW(b.AddRootCategory("late"), std::logic_error);
  uint32_t x = b.AddEdgeTo(0x10);
  b.BeginEdgesOf(x);
  EXPECT_THROW(b.BeginEdgesOf(c), std::logic_error);  // out of order
  EXPECT_THROW(b.BeginEdgesOf(x), std::logic_error);  // twice
  EXPECT_THROW(b.SetNodeInfo(x + 1, 0, 0, 0), std::logic_error);
  EXPECT_THROW(b.SetNodeInfo(x, 12345, 0, 0), std::out_of_range);
  HeapGraph g = b.Finish();
  EXPECT_THROW(g.SetEdgeName(x, 12345), std::out_of_range);
  EXPECT_THROW(g.SetEdgeName(x + 1, 0), std::out_of_range);
}

TEST(HeapGraphTest, FinishResetsTheBuilderAndFindWorksWhileBuilding) {
  HeapGraphBuilder b;
  uint32_t c = b.AddRootCategory("vm");
  b.BeginEdgesOf(c);
  uint32_t x = b.AddEdgeTo(0x10);
  EXPECT_EQ(b.Find(0x10), x);
  EXPECT_EQ(b.Find(0x18), HeapGraphBuilder::kNotFound);
  HeapGraph g1 = b.Finish();
  EXPECT_EQ(g1.node_count(), 3u);
  EXPECT_EQ(b.node_count(), 1u);
  EXPECT_EQ(b.Find(0x10), HeapGraphBuilder::kNotFound);
  c = b.AddRootCategory("other");
  b.BeginEdgesOf(c);
  b.AddEdgeTo(0x99);
  HeapGraph g2 = b.Finish();
  EXPECT_EQ(g2.node_count(), 3u);
  EXPECT_EQ(g2.name(g2.edge_name(1)), "other");
}

// Many objects (the address table grows many times, with Reserve and
// without): every address maps to one node, the graph matches a reference
// BFS, and two builds give identical graphs.
TEST(HeapGraphTest, LargeRandomHeapMatchesReferenceBfs) {
  const uint32_t kObjects = 50000;
  std::mt19937 rng(7);
  std::vector<std::vector<uint32_t>> out(kObjects);
  for (uint32_t i = 0; i < kObjects; i++) {
    uint32_t deg = rng() % 5;
    for (uint32_t k = 0; k < deg; k++) out[i].push_back(rng() % kObjects);
  }
  std::vector<uint32_t> roots = {0, 1, 2, 3, 0, 77};
  // Addresses look like VALUEs: 8-byte aligned, clustered.
  auto addr = [](uint32_t id) { return 0x7f0000000000ull + uint64_t{id} * 40; };

  for (bool reserve : {false, true}) {
    HeapGraphBuilder b;
    if (reserve) b.Reserve(kObjects, kObjects * 2);
    uint32_t cat = b.AddRootCategory("vm");
    b.BeginEdgesOf(cat);
    for (uint32_t r : roots) b.AddEdgeTo(addr(r));
    for (uint32_t i = b.first_object_node(); i < b.node_count(); i++) {
      uint32_t id = static_cast<uint32_t>((b.address(i) - addr(0)) / 40);
      b.BeginEdgesOf(i);
      for (uint32_t t : out[id]) b.AddEdgeTo(addr(t));
    }
    size_t building = b.MemoryBytes();
    HeapGraph g = b.Finish();
    EXPECT_LT(g.MemoryBytes(), building);

    // Reference BFS over ids.
    std::vector<uint32_t> order, parent(kObjects, UINT32_MAX);
    std::vector<bool> seen(kObjects, false);
    std::queue<uint32_t> q;
    for (uint32_t r : roots)
      if (!seen[r]) {
        seen[r] = true;
        order.push_back(r);
        q.push(r);
      }
    while (!q.empty()) {
      uint32_t u = q.front();
      q.pop();
      for (uint32_t t : out[u])
        if (!seen[t]) {
          seen[t] = true;
          parent[t] = u;
          order.push_back(t);
          q.push(t);
        }
    }
    ASSERT_EQ(g.node_count(), order.size() + 2);
    std::vector<uint32_t> node_of(kObjects, UINT32_MAX);
    for (size_t k = 0; k < order.size(); k++) {
      uint32_t v = static_cast<uint32_t>(k + 2);
      ASSERT_EQ(g.address(v), addr(order[k]));
      node_of[order[k]] = v;
    }
    size_t edges = roots.size() + 1;
    for (size_t k = 0; k < order.size(); k++) {
      uint32_t v = static_cast<uint32_t>(k + 2), id = order[k];
      uint32_t want_parent = parent[id] == UINT32_MAX ? cat : node_of[parent[id]];
      ASSERT_EQ(g.tree_parent(v), want_parent);
      std::vector<uint32_t> want;
      for (uint32_t t : out[id]) want.push_back(node_of[t]);
      ASSERT_EQ(Targets(g, v), want);
      edges += want.size();
    }
    EXPECT_EQ(g.edge_count(), edges);
  }
}

}  // namespace
}  // namespace fathom
