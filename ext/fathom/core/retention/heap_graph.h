// HeapGraph: a snapshot of the object graph (who references whom) in flat
// arrays, built breadth-first from the GC roots, for retention analysis
// (dominators, retained sizes, "why is this alive" paths).
//
// Node numbering:
//   0            a virtual super-root; its edges go to the categories
//   1..k         virtual root-category nodes ("vm", "machine_context",
//                "global_tbl", "finalizers", ...), one per category name
//   k+1..n-1     objects, in discovery order
// Objects are discovered breadth-first: HeapGraphBuilder::BeginEdgesOf is
// called in increasing node order and AddEdgeTo numbers a new object when it
// is first seen. So node order is BFS order, and every node's tree_parent
// (its first referrer) has a smaller index: following tree_parent from a
// node gives a shortest path from the roots (among the paths that avoid
// deferred edges where there is one: see AddDeferredEdgeTo). Two
// consequences used elsewhere, which hold for any such spanning tree:
//  - every dominator of a node lies on that tree path (a dominator is on
//    every path from the root), hence has a smaller index than the node;
//  - so increasing index order is a valid parents-before-children order of
//    the dominator tree, and reverse index order a children-first one: no
//    extra ordering arrays are needed to aggregate over the dominator tree.
// Every node of a HeapGraph is reachable from node 0 by construction.
//
// Roles. Each object node is the program's (the default), one of the
// profiler's own objects (is_own: set apart, charged to nothing), or a
// runtime internal (is_internal: compiled code, method caches, and, once
// ExtendInternals ran, whatever only they lead to; charged to one row of
// their own). See
// HeapGraphBuilder::AddOwnEdgeTo for how the walk keeps the profiler's own
// objects from naming, dominating or retaining the program's, and
// retention_profile.h for how each role is charged.
//
// Memory (the point of the layout: a 1M-object heap must fit in tens of MB):
//   per node   address 8, edge_begin 4, class_name 4, type 1 (the Ruby
//              type in 6 bits, the role in 2), self_size 4,
//              tree_parent 4, edge_name 4                      = 29 bytes
//   per edge   edge_target 4                                   =  4 bytes
// plus the name strings (few: class names and bucketed edge names).
// ReleaseEdges() drops the per-edge part and edge_begin once dominators are
// computed and edges named (a retention profile needs neither).
// self_size is stored in 32 bits; the rare object of 4 GiB or more keeps its
// size in a side table. The tree edge of each node (the edge that discovered
// it) is not stored as an index: the top bit of its edge_target entry flags
// it, which is enough to recover its ordinal within the parent's edge list
// (ForEachTreeChild) at no memory cost. That caps a graph
// at 2^31 - 1 nodes. While building, the address table adds 4 bytes per
// slot at load <= 0.6 (6.7-13.3 bytes per node); Finish() frees it.
//
// Not thread-safe. A finished HeapGraph is read-only except for SetEdgeName
// and InternName, so it can be analysed off the GVL while nothing else
// touches it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/mapped_vector.h"
#include "base/string_interner.h"

namespace fathom {

// A plain CSR adjacency view, as ComputeDominators takes it: the edges of
// node v are edge_target[edge_begin[v] .. edge_begin[v + 1]), each masked
// with target_mask (HeapGraph keeps a flag in the top bit).
struct CsrGraphView {
  uint32_t node_count = 0;
  const uint32_t* edge_begin = nullptr;  // node_count + 1 entries
  const uint32_t* edge_target = nullptr;
  uint32_t target_mask = UINT32_MAX;
};

struct HeapGraphParts;

class HeapGraph {
 public:
  static constexpr uint32_t kSuperRoot = 0;
  static constexpr uint32_t kMaxNodes = (1u << 31) - 1;

  // A graph whose breadth-first numbering was done by the caller (the heap
  // dump reader resolves addresses to indices itself, so
  // HeapGraphBuilder's address table would only be a second copy). Checks
  // what the rest relies on, in O(nodes + edges), and throws
  // std::invalid_argument when it does not hold: array sizes, edge_begin
  // ascending from 0 to the edge count, targets in range, categories
  // 1..category_count under the super-root, tree_parent(v) < v, and exactly
  // one tree edge into every other node, from its tree_parent. self_size
  // must be below UINT32_MAX (no large sizes).
  static HeapGraph FromParts(HeapGraphParts&& parts);

  uint32_t node_count() const { return static_cast<uint32_t>(address_.size()); }
  uint32_t edge_count() const { return static_cast<uint32_t>(edge_target_.size()); }
  uint32_t category_count() const { return category_count_; }
  uint32_t first_object_node() const { return category_count_ + 1; }
  bool is_category(uint32_t node) const { return node >= 1 && node <= category_count_; }
  // The super-root and the categories: no object behind them.
  bool is_virtual(uint32_t node) const { return node <= category_count_; }

  // Object address (a Ruby VALUE, opaque here); 0 for virtual nodes.
  uint64_t address(uint32_t node) const { return address_[node]; }
  uint32_t class_name(uint32_t node) const { return class_name_[node]; }  // id in names(); 0 = unknown
  uint8_t type(uint32_t node) const { return type_[node] & kTypeMask; }
  // Roles (see the top of this file). A node is never both: the profiler's
  // own objects are own whatever their type.
  bool is_own(uint32_t node) const { return (type_[node] & kOwnBit) != 0; }
  bool is_internal(uint32_t node) const { return (type_[node] & (kOwnBit | kInternalBit)) == kInternalBit; }
  uint64_t self_size(uint32_t node) const {
    uint32_t s = self_size_[node];
    return s != kLargeSize ? s : large_sizes_.at(node);
  }
  // The node's first referrer in BFS order (0 for the super-root and the categories).
  uint32_t tree_parent(uint32_t node) const { return tree_parent_[node]; }
  // Id in names() of the name of the edge tree_parent -> node; 0 = unnamed.
  // A category's edge name is the category name.
  uint32_t edge_name(uint32_t node) const { return edge_name_[node]; }

  // Edges of node: indices edge_begin(node) .. edge_end(node) - 1, in the
  // order they were added (duplicates and self edges included).
  uint32_t edge_begin(uint32_t node) const { return edge_begin_[node]; }
  uint32_t edge_end(uint32_t node) const { return edge_begin_[node + 1]; }
  uint32_t edge_target(uint32_t edge) const { return edge_target_[edge] & kTargetMask; }
  // True for the edge that discovered its target (exactly one per object node).
  bool is_tree_edge(uint32_t edge) const { return (edge_target_[edge] & kTreeEdgeBit) != 0; }


  // Calls f(ordinal, child) for each node whose tree edge comes from
  // `node`, in edge order; ordinal is the edge's position in node's edges.
  template <typename F>
  void ForEachTreeChild(uint32_t node, F&& f) const {
    if (!has_edges()) return;
    uint32_t begin = edge_begin_[node], end = edge_begin_[node + 1];
    for (uint32_t e = begin; e < end; e++)
      if (edge_target_[e] & kTreeEdgeBit) f(e - begin, edge_target_[e] & kTargetMask);
  }

  // The root categories with an edge straight to `node` (in category
  // order, each once): which kinds of root hold it themselves, e.g.
  // machine_context when a C stack slot points at it, whatever path names
  // it. Scans the categories' edge lists (the roots, not the heap). Needs
  // the edges (std::logic_error after ReleaseEdges), std::out_of_range for
  // an unknown node.
  std::vector<uint32_t> RootCategoriesHolding(uint32_t node) const;

  // Marks internal every object node the roots reach only through
  // internal nodes (a literal of compiled code; a frozen string literal
  // that many iseqs share, which no one of them dominates), own nodes
  // excepted: so that "what only the internals keep alive" means what is
  // unreachable without them, not just what one internal dominates. One
  // breadth-first walk over the edges that never enters an internal node;
  // a queue of 4 bytes per node and a bit per node while it runs. Needs the
  // edges (std::logic_error after ReleaseEdges). Returns how many nodes it
  // marked; none when no node is internal (a graph from a heap dump).
  size_t ExtendInternals();

  // Frees the edge arrays (4 bytes per node + 4 per edge) once nothing
  // needs them: dominators are computed and edges named. Retention profiles
  // and frame names need only the per-node arrays. Afterwards edge_count()
  // is 0, has_edges() false, and the edge accessors, ForEachTreeChild,
  // csr() and ComputeDominators must not be used
  // (ComputeDominators throws std::logic_error).
  void ReleaseEdges();
  bool has_edges() const { return !edge_begin_.empty(); }

  // Names: class names, edge names and category names share one table.
  const StringInterner& names() const { return names_; }
  const std::string& name(uint32_t id) const { return names_.Get(id); }
  uint32_t InternName(std::string_view s) { return names_.Intern(s); }
  // Names the edge tree_parent(node) -> node. std::out_of_range for an
  // unknown node or name id.
  void SetEdgeName(uint32_t node, uint32_t name_id);
  void SetEdgeName(uint32_t node, std::string_view name) { SetEdgeName(node, names_.Intern(name)); }

  // The adjacency as ComputeDominators takes it (valid while *this lives
  // and is not moved).
  CsrGraphView csr() const {
    return CsrGraphView{node_count(), edge_begin_.data(), edge_target_.data(), kTargetMask};
  }

  // Bytes held by the arrays (capacities, not sizes); names not counted.
  size_t MemoryBytes() const;

 private:
  friend class HeapGraphBuilder;

  static constexpr uint32_t kTreeEdgeBit = 1u << 31;
  static constexpr uint32_t kTargetMask = kTreeEdgeBit - 1;
  static constexpr uint32_t kLargeSize = UINT32_MAX;  // real size in large_sizes_
  // type_ holds the Ruby type (below 0x40: T_MASK is 0x1f) and two role bits.
  static constexpr uint8_t kTypeMask = 0x3f;
  static constexpr uint8_t kInternalBit = 0x40;
  static constexpr uint8_t kOwnBit = 0x80;

  MappedVector<uint64_t> address_;
  MappedVector<uint32_t> class_name_;
  MappedVector<uint8_t> type_;
  MappedVector<uint32_t> self_size_;
  std::unordered_map<uint32_t, uint64_t> large_sizes_;  // node -> size, for sizes >= kLargeSize
  MappedVector<uint32_t> tree_parent_;
  MappedVector<uint32_t> edge_name_;
  MappedVector<uint32_t> edge_begin_;   // node_count() + 1 entries once finished
  MappedVector<uint32_t> edge_target_;  // node index | kTreeEdgeBit on tree edges
  uint32_t category_count_ = 0;
  StringInterner names_;
};

// The arrays of HeapGraph::FromParts, with the meanings of the accessors
// above (edge_target carries HeapGraph's tree-edge bit, 1u << 31).
struct HeapGraphParts {
  static constexpr uint32_t kTreeEdgeBit = 1u << 31;
  uint32_t category_count = 0;
  MappedVector<uint64_t> address;
  MappedVector<uint32_t> class_name;
  MappedVector<uint8_t> type;  // below 0x40 (no roles: every object is the program's)
  MappedVector<uint32_t> self_size;
  MappedVector<uint32_t> tree_parent;
  MappedVector<uint32_t> edge_name;
  MappedVector<uint32_t> edge_begin;  // node count + 1 entries
  MappedVector<uint32_t> edge_target;
  StringInterner names;
};

// Builds a HeapGraph from a breadth-first walk. The protocol (what the Ruby
// heap walker does):
//
//   HeapGraphBuilder b;
//   b.Reserve(expected_objects, expected_edges);         // optional
//   uint32_t vm = b.AddRootCategory("vm");               // nodes 1..k; 0 -> c edges are implicit
//   ...
//   b.BeginEdgesOf(vm);  b.AddEdgeTo(addr); ...          // each category's roots, categories in order
//   for (uint32_t i = b.first_object_node(); i < b.node_count(); i++) {
//     b.SetNodeInfo(i, class_id, type, size);            // object at b.address(i)
//     b.BeginEdgesOf(i);  for each child: b.AddEdgeTo(child_addr);
//   }
//   HeapGraph g = b.Finish();
//
// node_count() grows while the loop runs: the loop is the BFS queue.
// BeginEdgesOf must be called in strictly increasing node order (nodes may
// be skipped: they get no edges), AddRootCategory only before the first
// BeginEdgesOf. Misuse throws std::logic_error (std::length_error when the
// graph outgrows 2^31 - 1 nodes or 2^32 - 1 edges).
class HeapGraphBuilder {
 public:
  HeapGraphBuilder();

  // Pre-sizes the arrays and the address table for about this many object
  // nodes and edges (e.g. the live object count and 3x that), so that they
  // need not grow: growing is by 1.5x and transiently needs 2.5x an
  // array's size. Finish() trims what was not used.
  // A hint: counts above kMaxReservedObjects (and 4x that many edges) are
  // capped, and a reservation that cannot be allocated is skipped.
  void Reserve(size_t objects, size_t edges);
  static constexpr size_t kMaxReservedObjects = size_t{1} << 24;  // 16M objects: ~0.6 GB of arrays

  // Returns the category node for name, creating it (with the edge
  // super-root -> category) on first use.
  uint32_t AddRootCategory(std::string_view name);

  // Starts the edge list of node; later AddEdgeTo calls add edges from it.
  void BeginEdgesOf(uint32_t node);

  // Adds an edge from the current node to the object at address, and
  // returns the target's node index. An address seen for the first time
  // becomes a new node whose tree_parent is the current node.
  uint32_t AddEdgeTo(uint64_t address);

  // Adds an edge from the current node whose target is only looked up,
  // and if new numbered, by a later DiscoverDeferred(): the edge keeps its
  // place in the current node's list (the CSR stays in order), but it
  // takes part in the walk only once every object reachable without
  // deferred edges is walked. That decides which path names an object
  // (its tree parent), never which objects are reachable or what
  // dominates them: the edges are the same either way.
  //
  // For holders that are real roots but not an object's owner: the words
  // of a machine stack that look like object addresses (conservative
  // roots), and the stacks of threads and fibers. An object a constant
  // holds is then named by the constant even while a stack slot also
  // points at it, and a stack names only what nothing else holds.
  //
  // `tier` orders the deferred edges among themselves: all pending edges of
  // the lowest tier are resolved first, and a higher tier only once the
  // walk they started is done (the walker calls DiscoverDeferred() each
  // time its queue runs empty). Tiers are below kDeferredTiers.
  static constexpr uint8_t kDeferredTiers = 4;
  void AddDeferredEdgeTo(uint64_t address, uint8_t tier = 0);
  // The profiler's own objects (HeapGraph::is_own). An edge to one of them
  // (the profiler's module, an instance of one of its classes, one of its
  // threads: the caller decides) is added with AddOwnEdgeTo. From a node
  // that is not own it is deferred past every tier above, so that all the
  // program reaches without the profiler's objects is numbered first; the
  // objects such edges then discover are own, and so is everything only
  // they lead to (a new node inherits its tree parent's role). From then
  // on an edge *from* an own node to an object numbered before the first
  // own one (which the program reaches without the profiler) is not
  // stored at all: the profiler's references neither name, dominate nor
  // retain the program's objects, which are charged as if the profiler
  // did not exist. So an object both hold is the program's, and whatever
  // the profiler alone holds is own. From an own node, AddOwnEdgeTo is
  // AddEdgeTo.
  void AddOwnEdgeTo(uint64_t address);
  // From an own node: an edge to an object that is the program's although
  // only the profiler's objects lead to it (the rest of an app's middleware
  // chain behind the profiler's own middleware). A node it discovers is not
  // own; what only that node leads to is the program's again. Subject to
  // the rule above (not stored when the target was numbered before the
  // first own node). From any other node it is AddEdgeTo.
  uint32_t AddProgramEdgeTo(uint64_t address);
  // Marks an object node as a runtime internal (HeapGraph::is_internal; an
  // own node stays own).
  void MarkInternal(uint32_t node);
  bool is_own(uint32_t node) const { return graph_.is_own(node); }
  // Edges not stored because they led from an own node to the program's
  // objects (see AddOwnEdgeTo). Reset by Finish.
  size_t dropped_own_edges() const { return dropped_own_edges_; }

  // Resolves the pending deferred edges of the lowest tier: an address
  // already walked becomes a plain edge, a new one a new node (tree parent:
  // the edge's source). Goes on with the next tier while a tier adds no
  // node. Returns whether any node was added, i.e. whether the walk must go
  // on (false once no deferred edge is pending).
  bool DiscoverDeferred();
  // Deferred edges added and not yet resolved.
  size_t pending_deferred() const { return deferred_.size(); }

  // Class (an InternName id), Ruby type and self size of an object node.
  // std::logic_error for an unknown node, std::out_of_range for an unknown
  // name id.
  void SetNodeInfo(uint32_t node, uint32_t class_name_id, uint8_t type, uint64_t self_size);

  // Interns a class or edge name (the ids go to SetNodeInfo / SetEdgeName).
  // The interner builds a std::string per call: cache ids by class on the
  // caller's side rather than interning once per object.
  uint32_t InternName(std::string_view s) { return graph_.names_.Intern(s); }

  uint32_t node_count() const { return graph_.node_count(); }
  uint32_t first_object_node() const { return graph_.first_object_node(); }
  uint64_t address(uint32_t node) const { return graph_.address_[node]; }
  // The node for address, or kNotFound (objects only).
  static constexpr uint32_t kNotFound = UINT32_MAX;
  uint32_t Find(uint64_t address) const;

  // Bytes held by the arrays and the address table (capacities).
  size_t MemoryBytes() const;

  // Ends the walk: frees the address table, trims the arrays and hands the
  // graph over. The builder is left empty (reusable).
  HeapGraph Finish();

 private:
  static constexpr uint32_t kEmptySlot = UINT32_MAX;
  static constexpr uint32_t kNoCurrent = UINT32_MAX;

  // The tier of AddOwnEdgeTo's deferred edges: after every caller tier.
  static constexpr uint8_t kOwnTier = kDeferredTiers;
  static constexpr uint32_t kNoOwnYet = UINT32_MAX;

  void ReserveExactly(size_t objects, size_t edges);
  // role: the role bits of a new node (HeapGraph::kOwnBit or 0).
  uint32_t NewNode(uint64_t address, uint32_t parent, uint8_t role);
  // Sets *target to address's node, numbering it (tree parent: source,
  // tree-edge bit set in *target, role bits `role`) if new; returns the node.
  uint32_t Resolve(uint64_t address, uint32_t source, uint32_t* target, uint8_t role);
  // The role bits a node discovered from the current node inherits.
  uint8_t InheritedRole() const { return graph_.type_[current_] & HeapGraph::kOwnBit; }
  // Whether an edge from the current node to address is left out: the
  // current node is own and the target was numbered before the first own
  // node (see AddOwnEdgeTo). Counts it.
  bool DropsOwnEdge(uint64_t address);
  uint32_t AddEdge(uint64_t address, uint8_t role);
  void GrowTable(size_t min_slots);
  void Reset();

  HeapGraph graph_;
  // Open addressing over node indices; a slot's key is read from
  // graph_.address_, so a slot costs 4 bytes, not 12. Power-of-two size,
  // linear probing, load <= 0.6; never erased.
  MappedVector<uint32_t> slots_;
  size_t objects_ = 0;             // nodes in slots_
  uint32_t current_ = kNoCurrent;  // node whose edges are being added
  // Edges added by AddDeferredEdgeTo and not yet resolved: where the edge
  // sits in edge_target_, its source, the target's address and its tier.
  struct DeferredEdge {
    uint32_t edge;
    uint32_t source;
    uint64_t address;
    uint8_t tier;
    uint8_t role;  // of the node it discovers, if it does
  };
  MappedVector<DeferredEdge> deferred_;
  // The first node the own tier numbered (every later one is own or
  // reached only through own ones), kNoOwnYet before it ran.
  uint32_t own_begin_ = kNoOwnYet;
  size_t dropped_own_edges_ = 0;
};

}  // namespace fathom
