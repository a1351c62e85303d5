#include "dump/dump_graph.h"

#include <algorithm>
#include <numeric>
#include <stdexcept>
#include <unordered_map>

namespace fathom {

const char* const kDumpUnavailableNames =
    "instance variable, constant, global, hash key, array index and captured-local names (a heap dump has no edge "
    "names: edges are named by the referrer's class, or by the module holding them)";

namespace {

// Address -> dump index, by binary search over a sorted permutation
// (4 bytes per object instead of a hash table's ~16-40).
class AddressIndex {
 public:
  explicit AddressIndex(const std::vector<uint64_t>& address) : address_(address), order_(address.size()) {
    std::iota(order_.begin(), order_.end(), 0u);
    std::sort(order_.begin(), order_.end(), [&](uint32_t a, uint32_t b) { return address_[a] < address_[b]; });
  }
  static constexpr uint32_t kMissing = UINT32_MAX;
  uint32_t Find(uint64_t a) const {
    auto it = std::lower_bound(order_.begin(), order_.end(), a, [&](uint32_t i, uint64_t v) { return address_[i] < v; });
    return it != order_.end() && address_[*it] == a ? *it : kMissing;
  }
  size_t MemoryBytes() const { return order_.capacity() * 4; }

 private:
  const std::vector<uint64_t>& address_;
  std::vector<uint32_t> order_;
};

}  // namespace

HeapGraph BuildDumpGraph(DumpHeap& heap, DumpGraphStats* stats) {
  DumpGraphStats local;
  if (!stats) stats = &local;
  *stats = DumpGraphStats{};
  size_t n = heap.size();
  if (heap.class_address.size() != n || heap.memsize.size() != n || heap.type.size() != n || heap.name.size() != n ||
      heap.ref_begin.size() != n + 1)
    throw std::logic_error("BuildDumpGraph: an incomplete DumpHeap");
  AddressIndex index(heap.address);
  HeapGraphBuilder b;
  b.Reserve(heap.size(), heap.refs.size() + 64);
  for (const auto& root : heap.roots) b.AddRootCategory(root.name);

  // Class names by class address, resolved lazily (a CLASS record may come
  // after its instances in the file).
  std::unordered_map<uint64_t, uint32_t> class_ids;
  auto class_name_of = [&](uint32_t i) -> uint32_t {
    uint8_t type = heap.type[i];
    if (type == kDumpImemo || type == kDumpIclass || type == kDumpNone || type == kDumpNode)
      return b.InternName(std::string("<") + DumpTypeClassName(type) + ">");
    if (type == kDumpClass) return b.InternName("Class");  // its "class" is its singleton class
    if (type == kDumpModule) return b.InternName("Module");
    uint64_t klass = heap.class_address[i];
    if (klass == 0) return b.InternName(std::string("<hidden ") + DumpTypeClassName(type) + ">");
    auto it = class_ids.find(klass);
    if (it != class_ids.end()) return it->second;
    uint32_t k = index.Find(klass);
    uint32_t id;
    if (k != AddressIndex::kMissing && heap.name[k] != 0)
      id = b.InternName(heap.names.Get(heap.name[k]));
    else
      id = b.InternName(DumpTypeClassName(type));  // anonymous or singleton class: the type's name
    class_ids.emplace(klass, id);
    return id;
  };

  uint32_t category = 1;
  for (auto& root : heap.roots) {
    b.BeginEdgesOf(category++);
    for (uint64_t a : root.refs) {
      if (index.Find(a) == AddressIndex::kMissing) {
        if (!stats->dangling_references++) stats->first_dangling_address = a;
        continue;
      }
      b.AddEdgeTo(a);
    }
    std::vector<uint64_t>().swap(root.refs);
  }
  // Graph node -> dump index, filled as the BFS numbers nodes.
  std::vector<uint32_t> dump_index(b.first_object_node(), AddressIndex::kMissing);
  dump_index.reserve(heap.size() + b.first_object_node());
  for (uint32_t v = b.first_object_node(); v < b.node_count(); v++) {
    uint32_t i = index.Find(b.address(v));
    dump_index.push_back(i);
    b.SetNodeInfo(v, class_name_of(i), heap.type[i], heap.memsize[i]);
    b.BeginEdgesOf(v);
    for (uint32_t r = heap.ref_begin[i]; r < heap.ref_begin[i + 1]; r++) {
      uint64_t a = heap.refs[r];
      if (b.Find(a) == HeapGraphBuilder::kNotFound && index.Find(a) == AddressIndex::kMissing) {
        if (!stats->dangling_references++) stats->first_dangling_address = a;
        continue;
      }
      b.AddEdgeTo(a);
    }
  }
  stats->peak_bytes = heap.MemoryBytes() + b.MemoryBytes() + index.MemoryBytes() + dump_index.capacity() * 4;
  HeapGraph g = b.Finish();
  std::vector<uint64_t>().swap(heap.refs);
  std::vector<uint32_t>().swap(heap.ref_begin);

  uint64_t reached = g.node_count() - g.first_object_node();
  stats->unreachable_objects = heap.size() - reached;
  if (stats->unreachable_objects) {
    std::vector<bool> seen(heap.size());
    for (uint32_t v = g.first_object_node(); v < g.node_count(); v++) seen[dump_index[v]] = true;
    for (size_t i = 0; i < heap.size(); i++)
      if (!seen[i]) stats->unreachable_bytes += heap.memsize[i];
  }

  // Tree edge names (what the report prints for each hop).
  std::vector<uint32_t> in_names(g.category_count() + 1, 0);
  for (uint32_t c = 1; c <= g.category_count(); c++) in_names[c] = g.InternName("in " + g.name(g.edge_name(c)));
  std::unordered_map<uint32_t, uint32_t> via_ids;  // class name id -> "via <class>" id
  std::unordered_map<uint32_t, uint32_t> heap_name_ids;  // heap.names id -> graph name id
  auto own_name = [&](uint32_t dump_i) -> uint32_t {
    uint32_t n = heap.name[dump_i];
    if (n == 0) return 0;
    auto it = heap_name_ids.find(n);
    if (it != heap_name_ids.end()) return it->second;
    uint32_t id = g.InternName(heap.names.Get(n));
    heap_name_ids.emplace(n, id);
    return id;
  };
  for (uint32_t v = g.first_object_node(); v < g.node_count(); v++) {
    uint32_t i = dump_index[v];
    uint32_t parent = g.tree_parent(v);
    uint32_t name = own_name(i);  // a module's name, a string's prefix
    if (name == 0 || g.type(v) == kDumpString) {
      uint32_t edge;
      if (g.is_category(parent)) {
        edge = in_names[parent];
      } else if ((g.type(parent) == kDumpClass || g.type(parent) == kDumpModule) && own_name(dump_index[parent])) {
        edge = g.InternName("in " + g.name(own_name(dump_index[parent])));
      } else {
        uint32_t cls = g.class_name(parent);
        auto it = via_ids.find(cls);
        edge = it != via_ids.end() ? it->second : via_ids.emplace(cls, g.InternName("via " + g.name(cls))).first->second;
      }
      // A string keeps its referrer and adds its prefix: via Hash "session-1…"
      if (name != 0) edge = g.InternName(g.name(edge) + " " + g.name(name));
      name = edge;
    }
    g.SetEdgeName(v, name);
  }
  return g;
}

}  // namespace fathom
