#include <gtest/gtest.h>

#include <stdexcept>

#include "retention/heap_graph.h"

namespace fathom {
namespace {

// super-root 0 -> category 1 -> objects 2 and 3; 2 -> 3 (not a tree edge).
HeapGraphParts SmallParts() {
  constexpr uint32_t kTree = HeapGraphParts::kTreeEdgeBit;
  HeapGraphParts p;
  p.category_count = 1;
  uint32_t vm = p.names.Intern("vm"), cls = p.names.Intern("Object");
  p.address = {0, 0, 0x10, 0x18};
  p.class_name = {0, 0, cls, cls};
  p.type = {0, 0, 1, 1};
  p.self_size = {0, 0, 40, 80};
  p.tree_parent = {0, 0, 1, 1};
  p.edge_name = {0, vm, 0, 0};
  p.edge_begin = {0, 1, 3, 4, 4};
  p.edge_target = {1 | kTree, 2 | kTree, 3 | kTree, 3};
  return p;
}

TEST(HeapGraphParts, AssemblesAGraph) {
  HeapGraph g = HeapGraph::FromParts(SmallParts());
  EXPECT_EQ(g.node_count(), 4u);
  EXPECT_EQ(g.category_count(), 1u);
  EXPECT_EQ(g.name(g.edge_name(1)), "vm");
  EXPECT_EQ(g.self_size(3), 80u);
  EXPECT_TRUE(g.is_tree_edge(2));
  EXPECT_FALSE(g.is_tree_edge(3));
  EXPECT_EQ(g.edge_target(3), 3u);
}

// Every broken invariant is refused, never accepted into a graph that the
// dominators and the encoder would then misread.
TEST(HeapGraphParts, RefusesBrokenInvariants) {
  auto refused = [](void (*breakit)(HeapGraphParts&)) {
    HeapGraphParts p = SmallParts();
    breakit(p);
    try {
      HeapGraph::FromParts(std::move(p));
    } catch (const std::invalid_argument&) {
      return true;
    }
    return false;
  };
  EXPECT_TRUE(refused([](HeapGraphParts& p) { p.type.pop_back(); }));
  EXPECT_TRUE(refused([](HeapGraphParts& p) { p.tree_parent[2] = 3; }));         // parent after the node
  EXPECT_TRUE(refused([](HeapGraphParts& p) { p.edge_target[3] = 9; }));         // target out of range
  EXPECT_TRUE(refused([](HeapGraphParts& p) { p.edge_target[3] |= HeapGraphParts::kTreeEdgeBit; }));  // two tree edges into 3
  EXPECT_TRUE(refused([](HeapGraphParts& p) { p.edge_target[2] &= ~HeapGraphParts::kTreeEdgeBit; }));  // none into 3
  EXPECT_TRUE(refused([](HeapGraphParts& p) { p.edge_begin[2] = 0; }));          // not ascending
  EXPECT_TRUE(refused([](HeapGraphParts& p) { p.class_name[2] = 99; }));         // unknown name
  EXPECT_TRUE(refused([](HeapGraphParts& p) { p.self_size[2] = UINT32_MAX; }));
  EXPECT_TRUE(refused([](HeapGraphParts& p) { p.edge_begin.back() = 3; }));      // does not span the edges
}

}  // namespace
}  // namespace fathom
