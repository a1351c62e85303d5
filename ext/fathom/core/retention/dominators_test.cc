#include "retention/dominators.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <iostream>
#include <random>
#include <vector>

#include "retention/heap_graph.h"
#include "retention/retention_profile.h"

namespace fathom {
namespace {

// The library returns MappedVectors; the expectations here are plain vectors.
template <typename T>
std::vector<T> Std(const MappedVector<T>& v) {
  return std::vector<T>(v.begin(), v.end());
}

// A graph as adjacency lists, turned into CSR for ComputeDominators.
struct Graph {
  std::vector<std::vector<uint32_t>> out;
  std::vector<uint64_t> size;

  std::vector<uint32_t> begin, target;
  CsrGraphView Csr() {
    begin.assign(1, 0);
    target.clear();
    for (const auto& o : out) {
      target.insert(target.end(), o.begin(), o.end());
      begin.push_back(static_cast<uint32_t>(target.size()));
    }
    return CsrGraphView{static_cast<uint32_t>(out.size()), begin.data(), target.data()};
  }
};

// Nodes reachable from root without going through `removed` (kUnreachable: nothing removed).
std::vector<bool> Reach(const Graph& g, uint32_t root, uint32_t removed) {
  std::vector<bool> seen(g.out.size(), false);
  if (root == removed) return seen;
  std::vector<uint32_t> stack{root};
  seen[root] = true;
  while (!stack.empty()) {
    uint32_t u = stack.back();
    stack.pop_back();
    for (uint32_t t : g.out[u])
      if (t != removed && !seen[t]) {
        seen[t] = true;
        stack.push_back(t);
      }
  }
  return seen;
}

struct Brute {
  std::vector<uint32_t> idom;
  std::vector<uint64_t> retained;
};

// By definition: d dominates v iff v is unreachable once d is removed.
Brute BruteForce(const Graph& g, uint32_t root) {
  size_t n = g.out.size();
  std::vector<bool> reach = Reach(g, root, kUnreachable);
  // dom[d][v]: d dominates v (reachable v only).
  std::vector<std::vector<bool>> dom(n, std::vector<bool>(n, false));
  for (uint32_t d = 0; d < n; d++) {
    if (!reach[d]) continue;
    std::vector<bool> without = Reach(g, root, d);
    for (uint32_t v = 0; v < n; v++) dom[d][v] = reach[v] && !without[v];
  }
  Brute b;
  b.idom.assign(n, kUnreachable);
  b.retained.assign(n, 0);
  for (uint32_t v = 0; v < n; v++) {
    if (!reach[v]) continue;
    if (v == root) {
      b.idom[v] = root;
    } else {
      // The strict dominator that every other strict dominator dominates.
      for (uint32_t d = 0; d < n; d++) {
        if (d == v || !dom[d][v]) continue;
        bool closest = true;
        for (uint32_t e = 0; e < n; e++)
          if (e != v && e != d && dom[e][v] && !dom[e][d]) closest = false;
        if (closest) {
          EXPECT_EQ(b.idom[v], kUnreachable) << "two immediate dominators of " << v;
          b.idom[v] = d;
        }
      }
    }
    for (uint32_t w = 0; w < n; w++)
      if (dom[v][w]) b.retained[v] += g.size[w];
  }
  return b;
}

Graph RandomGraph(std::mt19937& rng) {
  Graph g;
  uint32_t n = 1 + rng() % 40;
  g.out.resize(n);
  g.size.resize(n);
  // Sparse to dense, so there are chains, diamonds, cycles and unreachable parts.
  uint32_t edges = rng() % (3 * n + 1);
  for (uint32_t k = 0; k < edges; k++) {
    uint32_t u = rng() % n;
    uint32_t t = (rng() % 4 == 0) ? u : rng() % n;  // plenty of self loops
    g.out[u].push_back(t);
    if (rng() % 8 == 0) g.out[u].push_back(t);  // and duplicates
  }
  for (uint32_t v = 0; v < n; v++) g.size[v] = rng() % 100;
  return g;
}

TEST(DominatorsTest, MatchBruteForceOnRandomGraphs) {
  std::mt19937 rng(12345);
  for (int iter = 0; iter < 500; iter++) {
    Graph g = RandomGraph(rng);
    uint32_t n = static_cast<uint32_t>(g.out.size());
    uint32_t root = rng() % n;
    // Often a "super-root" with several roots hanging off it.
    if (iter % 2 == 0) {
      uint32_t k = 1 + rng() % 4;
      for (uint32_t i = 0; i < k; i++) g.out[root].push_back(rng() % n);
    }
    Brute want = BruteForce(g, root);
    DominatorStats stats;
    MappedVector<uint32_t> idom = ComputeDominators(g.Csr(), root, &stats);
    ASSERT_EQ(Std(idom), want.idom) << "graph " << iter << " root " << root;
    ASSERT_EQ(Std(RetainedSizes(idom, g.size)), want.retained) << "graph " << iter;
    EXPECT_EQ(stats.reachable, static_cast<uint32_t>(n - std::count(want.idom.begin(), want.idom.end(), kUnreachable)));
  }
}

// The same random graphs as heaps: a super-root, 1-3 categories with root
// edges into the objects, fed breadth-first through HeapGraphBuilder. The
// builder renumbers nodes (BFS order, unreachable objects never appear);
// the dominators and retained sizes must still be the brute-force ones,
// and every idom must precede its node (RetainedSizes' fast path).
TEST(DominatorsTest, HeapGraphsMatchBruteForce) {
  std::mt19937 rng(777);
  for (int iter = 0; iter < 500; iter++) {
    Graph objects = RandomGraph(rng);
    uint32_t m = static_cast<uint32_t>(objects.out.size());
    uint32_t k = 1 + rng() % 3;
    // Reference graph: 0 = super-root, 1..k categories, k+1.. objects.
    Graph ref;
    ref.out.resize(1 + k + m);
    ref.size.assign(1 + k + m, 0);
    std::vector<std::vector<uint32_t>> roots(k);
    for (uint32_t c = 0; c < k; c++) {
      ref.out[0].push_back(1 + c);
      uint32_t r = rng() % 4;
      for (uint32_t i = 0; i < r; i++) {
        roots[c].push_back(rng() % m);
        ref.out[1 + c].push_back(1 + k + roots[c].back());
      }
    }
    for (uint32_t o = 0; o < m; o++) {
      for (uint32_t t : objects.out[o]) ref.out[1 + k + o].push_back(1 + k + t);
      ref.size[1 + k + o] = objects.size[o];
    }
    Brute want = BruteForce(ref, 0);

    // Every other graph defers some edges (as the Ruby walk defers stacks
    // and the conservative root), in random tiers: that changes which
    // path names a node, never its dominators or retained size.
    const bool deferring = iter % 2 == 1;
    auto addr = [](uint32_t o) { return 0x10000 + 8 * uint64_t{o}; };
    HeapGraphBuilder b;
    auto add = [&](uint64_t a) {
      if (deferring && rng() % 3 == 0)
        b.AddDeferredEdgeTo(a, static_cast<uint8_t>(rng() % HeapGraphBuilder::kDeferredTiers));
      else
        b.AddEdgeTo(a);
    };
    for (uint32_t c = 0; c < k; c++) ASSERT_EQ(b.AddRootCategory("cat" + std::to_string(c)), 1 + c);
    for (uint32_t c = 0; c < k; c++) {
      b.BeginEdgesOf(1 + c);
      for (uint32_t o : roots[c]) add(addr(o));
    }
    for (uint32_t v = b.first_object_node();; v++) {
      if (v == b.node_count() && !b.DiscoverDeferred()) break;
      uint32_t o = static_cast<uint32_t>((b.address(v) - 0x10000) / 8);
      b.SetNodeInfo(v, 0, 0, objects.size[o]);
      b.BeginEdgesOf(v);
      for (uint32_t t : objects.out[o]) add(addr(t));
    }
    ASSERT_EQ(b.pending_deferred(), 0u);
    HeapGraph g = b.Finish();
    // Builder node -> reference node.
    std::vector<uint32_t> ref_of(g.node_count());
    for (uint32_t v = 0; v < g.node_count(); v++)
      ref_of[v] = g.is_virtual(v) ? v : 1 + k + static_cast<uint32_t>((g.address(v) - 0x10000) / 8);

    MappedVector<uint32_t> idom = ComputeDominators(g);
    MappedVector<uint64_t> retained = RetainedSizes(g, idom);
    size_t reachable = 0;
    for (uint32_t v = 0; v < g.node_count(); v++) {
      ASSERT_NE(idom[v], kUnreachable);
      if (v > 0) {
        ASSERT_LT(idom[v], v);
      }
      ASSERT_EQ(ref_of[idom[v]], want.idom[ref_of[v]]) << "graph " << iter << " node " << v;
      ASSERT_EQ(retained[v], want.retained[ref_of[v]]) << "graph " << iter << " node " << v;
    }
    for (uint32_t d : want.idom) reachable += d != kUnreachable;
    ASSERT_EQ(g.node_count(), reachable);  // exactly the reachable objects became nodes
  }
}

TEST(DominatorsTest, HandComputedExamples) {
  // The classic Lengauer-Tarjan paper graph (R=0, A..L = 1..12).
  //   R -> A B C; A -> D; B -> A D E; C -> F G; D -> L; E -> H; F -> I;
  //   G -> I J; H -> E K; I -> K; J -> I; K -> I R; L -> H
  Graph g;
  g.out = {{1, 2, 3}, {4}, {1, 4, 5}, {6, 7}, {12}, {8}, {9}, {9, 10}, {5, 11}, {11}, {9}, {9, 0}, {8}};
  g.size.assign(13, 1);
  MappedVector<uint32_t> idom = ComputeDominators(g.Csr(), 0);
  //                                R  A  B  C  D  E  F  G  H  I  J  K  L
  EXPECT_EQ(Std(idom), (std::vector<uint32_t>{0, 0, 0, 0, 0, 0, 3, 3, 0, 0, 7, 0, 4}));
  MappedVector<uint64_t> retained = RetainedSizes(idom, g.size);
  EXPECT_EQ(retained[0], 13u);
  EXPECT_EQ(retained[3], 4u);  // C, F, G, J
  EXPECT_EQ(retained[4], 2u);  // D, L

  // Single node; root not 0; unreachable nodes.
  Graph one;
  one.out = {{}};
  one.size = {5};
  EXPECT_EQ(ComputeDominators(one.Csr(), 0), (MappedVector<uint32_t>{0}));
  Graph h;
  h.out = {{1}, {}, {0, 0}, {2}};
  h.size = {1, 2, 4, 8};
  MappedVector<uint32_t> d = ComputeDominators(h.Csr(), 2);
  EXPECT_EQ(Std(d), (std::vector<uint32_t>{2, 0, 2, kUnreachable}));
  EXPECT_EQ(Std(RetainedSizes(d, h.size)), (std::vector<uint64_t>{3, 2, 7, 0}));  // the general (non-BFS) order
  EXPECT_EQ(DominatorPath(d, 1), (std::vector<uint32_t>{1, 0, 2}));
  EXPECT_EQ(DominatorPath(d, 2), (std::vector<uint32_t>{2}));
  EXPECT_TRUE(DominatorPath(d, 3).empty());
  EXPECT_THROW(ComputeDominators(h.Csr(), 4), std::invalid_argument);
  Graph bad;
  bad.out = {{5}};
  EXPECT_THROW(ComputeDominators(bad.Csr(), 0), std::invalid_argument);

  HeapGraphBuilder builder;
  builder.BeginEdgesOf(builder.AddRootCategory("vm"));
  builder.AddEdgeTo(0x10);
  HeapGraph released = builder.Finish();
  EXPECT_EQ(ComputeDominators(released), (MappedVector<uint32_t>{0, 0, 1}));
  released.ReleaseEdges();
  EXPECT_THROW(ComputeDominators(released), std::logic_error);
}

// 0 -> 1 -> 2 -> ... -> n-1, plus n-1 -> 1 (a cycle whose eval walks the
// whole chain) and 0 -> n/2 (a shortcut). Neither the DFS nor eval may
// recurse: a recursive version overflows the stack here.
TEST(DominatorsTest, MillionNodeChainNeedsNoRecursion) {
  const uint32_t n = 1000000, half = n / 2;
  std::vector<uint32_t> begin(n + 1), target;
  target.reserve(n + 1);
  for (uint32_t v = 0; v < n; v++) {
    begin[v] = static_cast<uint32_t>(target.size());
    if (v + 1 < n) target.push_back(v + 1);
    if (v == 0) target.push_back(half);
    if (v == n - 1) target.push_back(1);
  }
  begin[n] = static_cast<uint32_t>(target.size());
  MappedVector<uint32_t> idom = ComputeDominators(CsrGraphView{n, begin.data(), target.data()}, 0);
  for (uint32_t v = 1; v < n; v++) ASSERT_EQ(idom[v], v == 1 || v == half ? 0 : v - 1) << v;
  MappedVector<uint64_t> retained = RetainedSizes(idom, std::vector<uint64_t>(n, 1));
  EXPECT_EQ(retained[0], n);
  EXPECT_EQ(retained[1], half - 1);
  EXPECT_EQ(retained[half], n - half);
  EXPECT_EQ(retained[n - 1], 1u);
  EXPECT_EQ(DominatorPath(idom, n - 1).size(), n - half + 1);
}

// An independent, simple algorithm for big graphs (Cooper, Harvey &
// Kennedy's iterative one): slow in theory, fine on random graphs.
std::vector<uint32_t> IterativeDominators(const Graph& g, uint32_t root) {
  uint32_t n = static_cast<uint32_t>(g.out.size());
  // Reverse postorder, iteratively.
  std::vector<uint32_t> post_num(n, kUnreachable), rpo;
  std::vector<std::pair<uint32_t, uint32_t>> stack{{root, 0}};
  std::vector<bool> seen(n, false);
  seen[root] = true;
  while (!stack.empty()) {
    auto& [u, i] = stack.back();
    if (i < g.out[u].size()) {
      uint32_t t = g.out[u][i++];
      if (!seen[t]) {
        seen[t] = true;
        stack.push_back({t, 0});
      }
    } else {
      post_num[u] = static_cast<uint32_t>(rpo.size());
      rpo.push_back(u);
      stack.pop_back();
    }
  }
  std::reverse(rpo.begin(), rpo.end());
  std::vector<std::vector<uint32_t>> preds(n);
  for (uint32_t u = 0; u < n; u++)
    if (seen[u])
      for (uint32_t t : g.out[u]) preds[t].push_back(u);
  std::vector<uint32_t> idom(n, kUnreachable);
  idom[root] = root;
  for (bool changed = true; changed;) {
    changed = false;
    for (uint32_t v : rpo) {
      if (v == root) continue;
      uint32_t nd = kUnreachable;
      for (uint32_t p : preds[v]) {
        if (idom[p] == kUnreachable) continue;
        if (nd == kUnreachable) {
          nd = p;
          continue;
        }
        uint32_t a = p, b = nd;
        while (a != b) {
          while (post_num[a] < post_num[b]) a = idom[a];
          while (post_num[b] < post_num[a]) b = idom[b];
        }
        nd = a;
      }
      if (idom[v] != nd) {
        idom[v] = nd;
        changed = true;
      }
    }
  }
  return idom;
}

TEST(DominatorsTest, MillionNodeRandomGraphMatchesIterativeAlgorithm) {
  const uint32_t n = 1000000;
  std::mt19937 rng(99);
  Graph g;
  g.out.resize(n);
  // A random tree with local parents (deep-ish) plus random cross edges,
  // about 2.5 edges per node, as in a heap.
  for (uint32_t v = 1; v < n; v++) g.out[v - 1 - rng() % std::min<uint32_t>(v, 1000)].push_back(v);
  for (uint32_t k = 0; k < n + n / 2; k++) g.out[rng() % n].push_back(rng() % n);
  auto t0 = std::chrono::steady_clock::now();
  DominatorStats stats;
  MappedVector<uint32_t> idom = ComputeDominators(g.Csr(), 0, &stats);
  auto t1 = std::chrono::steady_clock::now();
  std::cout << "[ timing   ] 1M random nodes, " << g.target.size() << " edges: dominators "
            << std::chrono::duration<double, std::milli>(t1 - t0).count() << " ms, peak "
            << static_cast<double>(stats.peak_bytes) / n << " bytes/node (" << stats.predecessor_entries
            << " predecessor entries)\n";
  EXPECT_EQ(stats.reachable, n);
  ASSERT_EQ(Std(idom), IterativeDominators(g, 0));
}

}  // namespace
}  // namespace fathom
