// Dominator tree and retained sizes of an object graph.
//
// d dominates v when every path from the root to v goes through d; the
// immediate dominator idom(v) is the closest strict dominator. For a heap,
// idom(v) is "the one object that, if it let go, would free v", and the
// retained size of v is the total self size of the nodes it dominates (v
// included): what would be freed with it.
//
// Algorithm: Semi-NCA (Georgiadis & Tarjan; the variant LLVM uses). It
// computes semidominators like Lengauer-Tarjan (a reverse-preorder sweep over
// predecessors with a path-compressed link/eval forest) and then each idom as
// the nearest common ancestor of the DFS parent and the semidominator, in one
// preorder sweep. O(m log n) worst case, in practice close to linear, and
// simpler and faster than Lengauer-Tarjan's bucket phase. No recursion
// anywhere: the DFS walks up its own parent array instead of keeping a stack,
// and eval compresses paths by pointer reversal, so a 1M-long chain costs no
// call stack and no side stack.
//
// Deterministic: the DFS visits a node's edges in their order, so the same
// graph always gives the same spanning tree, and the result (a dominator tree
// is unique anyway) never depends on hash order or addresses.
//
// Memory, for N reachable nodes and P kept predecessor entries (edges minus
// self edges and edges whose source's preorder number lies between the
// target's DFS parent's and the target's own, which cannot lower a
// semidominator: always at least the DFS-tree edges, so P <= m - N + 1):
//   result (doubles as preorder numbers, then eval labels)   4 bytes/node
//   preorder -> node, DFS parent/ancestor, semi/DFS cursor   12 bytes/node
//   predecessor offsets (then reused for the idoms)          4 bytes/node
//   predecessors                                             4 bytes/entry
// i.e. a peak of 20 bytes per node + 4 per kept predecessor (a heap with 2.5
// edges per object: ~26 bytes per node), on top of the graph; all but the
// result is freed on return.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "retention/heap_graph.h"

namespace fathom {

constexpr uint32_t kUnreachable = UINT32_MAX;

struct DominatorStats {
  uint32_t reachable = 0;          // nodes reached from the root
  size_t predecessor_entries = 0;  // P above
  size_t peak_bytes = 0;           // working arrays at the peak, result included
};

// idom of every node of g: idom[root] == root, kUnreachable for nodes the
// root does not reach. Throws std::invalid_argument if root >= node_count or
// an edge points outside the graph.
MappedVector<uint32_t> ComputeDominators(const CsrGraphView& g, uint32_t root, DominatorStats* stats = nullptr);
// The same over a HeapGraph, rooted at the super-root (node 0).
MappedVector<uint32_t> ComputeDominators(const HeapGraph& g, DominatorStats* stats = nullptr);

// Retained size of every node: its self size plus that of every node it
// dominates (0 for unreachable nodes). idom must come from ComputeDominators.
// When every idom has a smaller index than its node (always so for a
// HeapGraph: see heap_graph.h) this is one backward pass with no extra
// memory; otherwise the tree is summed children-first with 8 bytes/node of
// scratch.
MappedVector<uint64_t> RetainedSizes(const MappedVector<uint32_t>& idom, const std::vector<uint64_t>& self_sizes);
// On a HeapGraph with roles (HeapGraph::is_own, is_internal) the sizes are
// those the retention profile charges (retention_profile.h): an own node
// counts 0; a node is in the runtime-internals group when it is internal
// or its idom is in it (an own node never is), else in the program's; and
// a node's retained size counts only the nodes of its own group in its
// dominator subtree (an own node passes its program descendants' on). So
// the program's objects' retained sizes leave out the runtime internals
// (a row of their own) and the profiler's objects (charged to nothing),
// and an internal's counts only internals. Without roles (every graph
// from a heap dump) it is the plain retained size. Throws
// std::invalid_argument when, with roles, an idom does not precede its node
// (ComputeDominators on a HeapGraph never gives one).
MappedVector<uint64_t> RetainedSizes(const HeapGraph& g, const MappedVector<uint32_t>& idom);

// The dominator-tree path from node up to the root: node, idom(node),
// idom(idom(node)), ..., root. Empty for an unreachable node.
std::vector<uint32_t> DominatorPath(const MappedVector<uint32_t>& idom, uint32_t node);

}  // namespace fathom
