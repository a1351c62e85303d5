#include "retention/heap_graph.h"

#include <algorithm>
#include <stdexcept>
#include <string>
#include <utility>

#include "base/hash_util.h"

namespace fathom {
namespace {

// Grows by 1.5x rather than std::vector's 2x: these arrays are tens of MB,
// and a walk that outgrows its Reserve estimate by a little should not
// double the largest of them.
template <typename T>
void MakeRoom(MappedVector<T>& v) {
  if (v.size() == v.capacity()) v.reserve(v.capacity() < 1024 ? 1024 : v.capacity() + v.capacity() / 2);
}

// Trims one array at a time, so the transient copy is one array's, not the graph's.
template <typename T>
void Trim(MappedVector<T>& v) {
  if (v.capacity() > v.size() + v.size() / 16) v.shrink_to_fit();
}

}  // namespace

void HeapGraph::SetEdgeName(uint32_t node, uint32_t name_id) {
  if (node >= node_count()) throw std::out_of_range("HeapGraph::SetEdgeName: unknown node " + std::to_string(node));
  if (name_id >= names_.size()) throw std::out_of_range("HeapGraph::SetEdgeName: unknown name id " + std::to_string(name_id));
  edge_name_[node] = name_id;
}

std::vector<uint32_t> HeapGraph::RootCategoriesHolding(uint32_t node) const {
  if (node >= node_count()) throw std::out_of_range("HeapGraph::RootCategoriesHolding: unknown node " + std::to_string(node));
  if (!has_edges()) throw std::logic_error("HeapGraph::RootCategoriesHolding: edges released");
  std::vector<uint32_t> holders;
  for (uint32_t c = 1; c <= category_count_; c++) {
    for (uint32_t e = edge_begin(c); e < edge_end(c); e++) {
      if (edge_target(e) == node) {
        holders.push_back(c);
        break;
      }
    }
  }
  return holders;
}

size_t HeapGraph::ExtendInternals() {
  if (!has_edges()) throw std::logic_error("HeapGraph::ExtendInternals: edges released");
  const uint32_t n = node_count();
  bool any = false;
  for (uint32_t v = first_object_node(); v < n && !any; v++) any = is_internal(v);
  if (!any) return 0;
  MappedVector<uint64_t> seen((n + 63) / 64, 0);
  auto visit = [&](uint32_t v) {
    bool was = (seen[v >> 6] >> (v & 63)) & 1;
    seen[v >> 6] |= uint64_t{1} << (v & 63);
    return !was;
  };
  MappedVector<uint32_t> queue;
  queue.reserve(n);
  visit(kSuperRoot);
  queue.push_back(kSuperRoot);
  for (size_t i = 0; i < queue.size(); i++) {
    uint32_t u = queue[i];
    for (uint32_t e = edge_begin_[u]; e < edge_begin_[u + 1]; e++) {
      uint32_t t = edge_target_[e] & kTargetMask;
      if (!is_internal(t) && visit(t)) queue.push_back(t);
    }
  }
  size_t marked = 0;
  for (uint32_t v = first_object_node(); v < n; v++) {
    if ((seen[v >> 6] >> (v & 63)) & 1 || is_own(v) || is_internal(v)) continue;
    type_[v] |= kInternalBit;
    marked++;
  }
  return marked;
}

void HeapGraph::ReleaseEdges() {
  MappedVector<uint32_t>().swap(edge_begin_);
  MappedVector<uint32_t>().swap(edge_target_);
}

size_t HeapGraph::MemoryBytes() const {
  return CapacityBytes(address_) + CapacityBytes(class_name_) + CapacityBytes(type_) + CapacityBytes(self_size_) +
         CapacityBytes(tree_parent_) + CapacityBytes(edge_name_) + CapacityBytes(edge_begin_) +
         CapacityBytes(edge_target_) + large_sizes_.size() * 32;
}

HeapGraph HeapGraph::FromParts(HeapGraphParts&& p) {
  auto fail = [](const std::string& what) { throw std::invalid_argument("HeapGraph::FromParts: " + what); };
  const size_t n = p.address.size();
  if (n == 0 || n > kMaxNodes) fail("node count " + std::to_string(n));
  if (p.class_name.size() != n || p.type.size() != n || p.self_size.size() != n || p.tree_parent.size() != n ||
      p.edge_name.size() != n || p.edge_begin.size() != n + 1)
    fail("array sizes do not match");
  if (p.category_count >= n) fail("more categories than nodes");
  if (p.edge_begin[0] != 0 || p.edge_begin[n] != p.edge_target.size() || p.edge_target.size() > UINT32_MAX)
    fail("edge_begin does not span the edges");
  const uint32_t names = static_cast<uint32_t>(p.names.size());
  MappedVector<bool> has_tree_edge(n, false);
  for (uint32_t v = 0; v < n; v++) {
    if (p.edge_begin[v + 1] < p.edge_begin[v]) fail("edge_begin not ascending at " + std::to_string(v));
    if (p.class_name[v] >= names || p.edge_name[v] >= names) fail("unknown name id at node " + std::to_string(v));
    if (p.type[v] > kTypeMask) fail("type out of range at node " + std::to_string(v));
    if (p.self_size[v] == kLargeSize) fail("self size too large at node " + std::to_string(v));
    uint32_t parent = p.tree_parent[v];
    if (v == 0 ? parent != 0 : (parent >= v || (v <= p.category_count) != (parent == 0)))
      fail("tree_parent out of order at node " + std::to_string(v));
    for (uint32_t e = p.edge_begin[v]; e < p.edge_begin[v + 1]; e++) {
      uint32_t t = p.edge_target[e] & kTargetMask;
      if (t >= n) fail("edge target out of range at node " + std::to_string(v));
      if (p.edge_target[e] & kTreeEdgeBit) {
        if (t == 0 || has_tree_edge[t] || p.tree_parent[t] != v) fail("bad tree edge into node " + std::to_string(t));
        has_tree_edge[t] = true;
      }
    }
  }
  for (uint32_t v = 1; v < n; v++)
    if (!has_tree_edge[v]) fail("no tree edge into node " + std::to_string(v));
  HeapGraph g;
  g.address_ = std::move(p.address);
  g.class_name_ = std::move(p.class_name);
  g.type_ = std::move(p.type);
  g.self_size_ = std::move(p.self_size);
  g.tree_parent_ = std::move(p.tree_parent);
  g.edge_name_ = std::move(p.edge_name);
  g.edge_begin_ = std::move(p.edge_begin);
  g.edge_target_ = std::move(p.edge_target);
  g.category_count_ = p.category_count;
  g.names_ = std::move(p.names);
  return g;
}

HeapGraphBuilder::HeapGraphBuilder() { Reset(); }

void HeapGraphBuilder::Reset() {
  graph_ = HeapGraph();
  // The super-root: no address, no class, no size; its edge list starts at 0.
  graph_.address_.push_back(0);
  graph_.class_name_.push_back(0);
  graph_.type_.push_back(0);
  graph_.self_size_.push_back(0);
  graph_.tree_parent_.push_back(HeapGraph::kSuperRoot);
  graph_.edge_name_.push_back(0);
  graph_.edge_begin_.assign(1, 0);
  MappedVector<uint32_t>().swap(slots_);
  MappedVector<DeferredEdge>().swap(deferred_);
  objects_ = 0;
  current_ = kNoCurrent;
  own_begin_ = kNoOwnYet;
  dropped_own_edges_ = 0;
}

void HeapGraphBuilder::Reserve(size_t objects, size_t edges) {
  // A hint, never a failure: the count comes from GC.stat, which has been
  // seen to wrap around (~1.8e19 live slots after Ractors ran on 3.1). Past
  // kMaxReservedObjects the arrays grow on demand instead, and a hint the
  // allocator cannot satisfy is dropped.
  if (objects > kMaxReservedObjects) objects = kMaxReservedObjects;
  if (edges > 4 * kMaxReservedObjects) edges = 4 * kMaxReservedObjects;
  try {
    ReserveExactly(objects, edges);
  } catch (const std::bad_alloc&) {
    // What was reserved keeps its room; the rest grows on demand.
  }
}

void HeapGraphBuilder::ReserveExactly(size_t objects, size_t edges) {
  // + a few for the super-root and the categories.
  size_t nodes = objects + 64;
  graph_.address_.reserve(nodes);
  graph_.class_name_.reserve(nodes);
  graph_.type_.reserve(nodes);
  graph_.self_size_.reserve(nodes);
  graph_.tree_parent_.reserve(nodes);
  graph_.edge_begin_.reserve(nodes + 1);
  graph_.edge_target_.reserve(edges);
  // Slots for `objects` at load <= 0.6.
  GrowTable(objects + objects * 2 / 3 + 1);
}

uint32_t HeapGraphBuilder::AddRootCategory(std::string_view name) {
  if (graph_.edge_begin_.size() != 1)
    throw std::logic_error("HeapGraphBuilder: AddRootCategory after BeginEdgesOf");
  uint32_t name_id = graph_.names_.Intern(name);
  // Categories are few (about ten), so a scan is the simplest lookup.
  for (uint32_t c = 1; c <= graph_.category_count_; c++)
    if (graph_.edge_name_[c] == name_id) return c;
  uint32_t node = NewNode(0, HeapGraph::kSuperRoot, 0);
  graph_.edge_name_.push_back(name_id);
  graph_.category_count_++;
  graph_.edge_target_.push_back(node | HeapGraph::kTreeEdgeBit);
  return node;
}

void HeapGraphBuilder::BeginEdgesOf(uint32_t node) {
  uint32_t last = static_cast<uint32_t>(graph_.edge_begin_.size() - 1);  // 0: only the super-root's so far
  if (node <= last || node >= graph_.node_count())
    throw std::logic_error("HeapGraphBuilder: BeginEdgesOf(" + std::to_string(node) +
                           ") out of order or unknown (last begun " + std::to_string(last) + ", " +
                           std::to_string(graph_.node_count()) + " nodes)");
  // Nodes skipped since `last` get empty edge lists.
  uint32_t here = static_cast<uint32_t>(graph_.edge_target_.size());
  while (graph_.edge_begin_.size() <= node) {
    MakeRoom(graph_.edge_begin_);
    graph_.edge_begin_.push_back(here);
  }
  current_ = node;
}

uint32_t HeapGraphBuilder::Find(uint64_t address) const {
  if (slots_.empty()) return kNotFound;
  size_t mask = slots_.size() - 1;
  for (size_t i = Mix64(address) & mask;; i = (i + 1) & mask) {
    uint32_t n = slots_[i];
    if (n == kEmptySlot) return kNotFound;
    if (graph_.address_[n] == address) return n;
  }
}

bool HeapGraphBuilder::DropsOwnEdge(uint64_t address) {
  // Only an own node's edges, and only once the own tier ran (it has, if
  // the current node is own): one probe per edge of the profiler's objects.
  if (!graph_.is_own(current_) || Find(address) >= own_begin_) return false;
  dropped_own_edges_++;
  return true;
}

uint32_t HeapGraphBuilder::AddEdge(uint64_t address, uint8_t role) {
  if (current_ == kNoCurrent) throw std::logic_error("HeapGraphBuilder: AddEdgeTo before BeginEdgesOf");
  if (DropsOwnEdge(address)) return Find(address);
  if (graph_.edge_target_.size() >= UINT32_MAX) throw std::length_error("HeapGraphBuilder: too many edges");
  MakeRoom(graph_.edge_target_);
  graph_.edge_target_.push_back(0);  // the slot; its value comes from Resolve
  return Resolve(address, current_, &graph_.edge_target_.back(), role);
}

uint32_t HeapGraphBuilder::AddEdgeTo(uint64_t address) {
  if (current_ == kNoCurrent) throw std::logic_error("HeapGraphBuilder: AddEdgeTo before BeginEdgesOf");
  return AddEdge(address, InheritedRole());
}

uint32_t HeapGraphBuilder::AddProgramEdgeTo(uint64_t address) {
  if (current_ == kNoCurrent) throw std::logic_error("HeapGraphBuilder: AddProgramEdgeTo before BeginEdgesOf");
  return AddEdge(address, 0);
}

void HeapGraphBuilder::AddOwnEdgeTo(uint64_t address) {
  if (current_ == kNoCurrent) throw std::logic_error("HeapGraphBuilder: AddOwnEdgeTo before BeginEdgesOf");
  if (graph_.is_own(current_)) {
    AddEdge(address, HeapGraph::kOwnBit);
    return;
  }
  if (graph_.edge_target_.size() >= UINT32_MAX) throw std::length_error("HeapGraphBuilder: too many edges");
  MakeRoom(graph_.edge_target_);
  MakeRoom(deferred_);
  deferred_.push_back({static_cast<uint32_t>(graph_.edge_target_.size()), current_, address, kOwnTier,
                       HeapGraph::kOwnBit});
  graph_.edge_target_.push_back(HeapGraph::kSuperRoot);  // placeholder until DiscoverDeferred
}

void HeapGraphBuilder::MarkInternal(uint32_t node) {
  if (node < graph_.first_object_node() || node >= graph_.node_count())
    throw std::logic_error("HeapGraphBuilder: MarkInternal on a node that is not an object");
  graph_.type_[node] |= HeapGraph::kInternalBit;
}

uint32_t HeapGraphBuilder::Resolve(uint64_t address, uint32_t source, uint32_t* target, uint8_t role) {
  // Grow before probing, so the probe below also finds the insertion slot.
  if ((objects_ + 1) * 5 > slots_.size() * 3) GrowTable(slots_.size() * 2);
  size_t mask = slots_.size() - 1;
  size_t i = Mix64(address) & mask;
  for (;; i = (i + 1) & mask) {
    uint32_t n = slots_[i];
    if (n == kEmptySlot) break;
    if (graph_.address_[n] == address) return *target = n;
  }
  uint32_t node = NewNode(address, source, role);
  slots_[i] = node;
  objects_++;
  *target = node | HeapGraph::kTreeEdgeBit;
  return node;
}

void HeapGraphBuilder::AddDeferredEdgeTo(uint64_t address, uint8_t tier) {
  if (current_ == kNoCurrent) throw std::logic_error("HeapGraphBuilder: AddDeferredEdgeTo before BeginEdgesOf");
  if (tier >= kDeferredTiers) throw std::logic_error("HeapGraphBuilder: deferred tier out of range");
  // An own node's edge to the program's objects is left out now: those
  // were all numbered before any own node was.
  if (DropsOwnEdge(address)) return;
  if (graph_.edge_target_.size() >= UINT32_MAX) throw std::length_error("HeapGraphBuilder: too many edges");
  MakeRoom(graph_.edge_target_);
  MakeRoom(deferred_);
  deferred_.push_back({static_cast<uint32_t>(graph_.edge_target_.size()), current_, address, tier, InheritedRole()});
  graph_.edge_target_.push_back(HeapGraph::kSuperRoot);  // placeholder until DiscoverDeferred
}

bool HeapGraphBuilder::DiscoverDeferred() {
  uint32_t before = graph_.node_count();
  while (!deferred_.empty() && graph_.node_count() == before) {
    uint8_t tier = UINT8_MAX;
    for (const DeferredEdge& d : deferred_) tier = std::min(tier, d.tier);
    // The first own node: every node numbered before it is reachable
    // without the profiler's objects (AddOwnEdgeTo).
    if (tier == kOwnTier && own_begin_ == kNoOwnYet) own_begin_ = graph_.node_count();
    // Resolve that tier in the order its edges were added; keep the rest
    // (compacted in place, order kept).
    size_t kept = 0;
    for (size_t i = 0; i < deferred_.size(); i++) {
      const DeferredEdge d = deferred_[i];
      if (d.tier == tier)
        Resolve(d.address, d.source, &graph_.edge_target_[d.edge], d.role);
      else
        deferred_[kept++] = d;
    }
    deferred_.resize(kept);
  }
  if (deferred_.empty()) MappedVector<DeferredEdge>().swap(deferred_);
  return graph_.node_count() > before;
}

uint32_t HeapGraphBuilder::NewNode(uint64_t address, uint32_t parent, uint8_t role) {
  if (graph_.address_.size() >= HeapGraph::kMaxNodes) throw std::length_error("HeapGraphBuilder: too many nodes");
  uint32_t node = graph_.node_count();
  MakeRoom(graph_.address_);
  MakeRoom(graph_.class_name_);
  MakeRoom(graph_.type_);
  MakeRoom(graph_.self_size_);
  MakeRoom(graph_.tree_parent_);
  graph_.address_.push_back(address);
  graph_.class_name_.push_back(0);
  graph_.type_.push_back(role);
  graph_.self_size_.push_back(0);
  graph_.tree_parent_.push_back(parent);
  return node;
}

void HeapGraphBuilder::SetNodeInfo(uint32_t node, uint32_t class_name_id, uint8_t type, uint64_t self_size) {
  if (node >= graph_.node_count()) throw std::logic_error("HeapGraphBuilder: SetNodeInfo on unknown node");
  if (class_name_id >= graph_.names_.size())
    throw std::out_of_range("HeapGraphBuilder: SetNodeInfo with unknown name id " + std::to_string(class_name_id));
  if (type > HeapGraph::kTypeMask) throw std::out_of_range("HeapGraphBuilder: SetNodeInfo with type " + std::to_string(type));
  graph_.class_name_[node] = class_name_id;
  graph_.type_[node] = static_cast<uint8_t>((graph_.type_[node] & ~HeapGraph::kTypeMask) | type);
  if (self_size >= HeapGraph::kLargeSize) {
    graph_.self_size_[node] = HeapGraph::kLargeSize;
    graph_.large_sizes_[node] = self_size;
  } else {
    graph_.self_size_[node] = static_cast<uint32_t>(self_size);
    graph_.large_sizes_.erase(node);  // a node given info twice
  }
}

void HeapGraphBuilder::GrowTable(size_t min_slots) {
  size_t capacity = 1024;
  while (capacity < min_slots) capacity *= 2;
  if (capacity <= slots_.size()) return;
  MappedVector<uint32_t>().swap(slots_);  // free first: the keys live in address_, not here
  slots_.assign(capacity, kEmptySlot);
  size_t mask = capacity - 1;
  uint32_t n = graph_.node_count();
  for (uint32_t node = graph_.first_object_node(); node < n; node++) {
    size_t i = Mix64(graph_.address_[node]) & mask;
    while (slots_[i] != kEmptySlot) i = (i + 1) & mask;
    slots_[i] = node;
  }
}

size_t HeapGraphBuilder::MemoryBytes() const { return graph_.MemoryBytes() + CapacityBytes(slots_); }

HeapGraph HeapGraphBuilder::Finish() {
  if (!deferred_.empty()) throw std::logic_error("HeapGraphBuilder: Finish with deferred edges unresolved");
  MappedVector<uint32_t>().swap(slots_);
  HeapGraph& g = graph_;
  uint32_t n = g.node_count();
  uint32_t here = static_cast<uint32_t>(g.edge_target_.size());
  while (g.edge_begin_.size() <= n) g.edge_begin_.push_back(here);
  g.edge_name_.resize(n, 0);  // only the super-root and categories had entries
  Trim(g.address_);
  Trim(g.class_name_);
  Trim(g.type_);
  Trim(g.self_size_);
  Trim(g.tree_parent_);
  Trim(g.edge_begin_);
  Trim(g.edge_target_);
  HeapGraph out = std::move(graph_);
  Reset();
  return out;
}

}  // namespace fathom
