#include "dump/dump_graph.h"

#include "base/hash_util.h"
#include "roots/vm_roots.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>
#include <unordered_map>

namespace fathom {

const char* const kDumpUnavailableNames =
    "instance variable, constant, global, hash key, array index and captured-local names (a heap dump has no edge "
    "names: edges are named by the referrer's class, or by the module holding them)";

namespace {

constexpr uint32_t kMissing = UINT32_MAX;

// Address -> dump index: open addressing over dump indices, the keys read
// from heap.address (4 bytes a slot, load <= 0.6: 6.7-13.3 bytes per
// object while it lives). One probe or two per reference, where binary
// search over a sorted permutation took log2(n) cache misses. A duplicated
// address (a damaged dump) keeps its first record.
class AddressIndex {
 public:
  explicit AddressIndex(const BigArray<uint64_t>& address) : address_(address) {
    size_t n = address.size(), cap = 1024;
    while (cap * 3 < n * 5) cap *= 2;
    slots_.assign(cap, kMissing);
    mask_ = cap - 1;
    for (uint32_t i = 0; i < n; i++) {
      uint64_t a = address[i];
      for (size_t s = Mix64(a) & mask_;; s = (s + 1) & mask_) {
        uint32_t j = slots_[s];
        if (j == kMissing) {
          slots_[s] = i;
          break;
        }
        if (address_[j] == a) break;
      }
    }
  }
  uint32_t Find(uint64_t a) const {
    for (size_t s = Mix64(a) & mask_;; s = (s + 1) & mask_) {
      uint32_t j = slots_[s];
      if (j == kMissing || address_[j] == a) return j;
    }
  }
  size_t MemoryBytes() const { return slots_.MemoryBytes(); }

 private:
  const BigArray<uint64_t>& address_;
  BigArray<uint32_t> slots_;
  size_t mask_ = 0;
};

template <typename T, typename A>
size_t CapacityBytes(const std::vector<T, A>& v) {
  return v.capacity() * sizeof(T);
}

// Class name ids (in the graph's names), per class id of the DumpHeap,
// resolved once per class: a CLASS record may come after its instances.
class ClassNames {
 public:
  ClassNames(const DumpHeap& heap, const AddressIndex& index, StringInterner& names) : names_(names) {
    class_name_.assign(heap.classes.size(), 0);
    for (uint32_t c = 1; c < heap.classes.size(); c++) {
      uint32_t k = index.Find(heap.classes.Get(c));
      if (k != kMissing && (heap.type[k] == kDumpClass || heap.type[k] == kDumpModule) && heap.name[k] != 0)
        class_name_[c] = names_.Intern(heap.names.Get(heap.name[k]));
    }
    for (uint32_t t = 0; t < 256; t++) by_type_[t] = hidden_[t] = kMissing;
  }
  uint32_t Of(uint8_t type, uint32_t klass) {
    if (type == kDumpImemo || type == kDumpIclass || type == kDumpNone || type == kDumpNode)
      return Cached(by_type_, type, [&] { return std::string("<") + DumpTypeClassName(type) + ">"; });
    if (type == kDumpClass) return Cached(by_type_, type, [] { return std::string("Class"); });  // its "class" is its singleton class
    if (type == kDumpModule) return Cached(by_type_, type, [] { return std::string("Module"); });
    if (klass == 0) return Cached(hidden_, type, [&] { return std::string("<hidden ") + DumpTypeClassName(type) + ">"; });
    if (class_name_[klass]) return class_name_[klass];
    // An anonymous or singleton class: the type's name.
    return Cached(by_type_, type, [&] { return std::string(DumpTypeClassName(type)); });
  }

 private:
  template <typename Make>
  uint32_t Cached(uint32_t (&ids)[256], uint8_t type, Make make) {
    if (ids[type] == kMissing) ids[type] = names_.Intern(make());
    return ids[type];
  }

  StringInterner& names_;
  std::vector<uint32_t> class_name_;
  uint32_t by_type_[256];  // per type: the fixed names above, or the type's name
  uint32_t hidden_[256];
};

// What ReshapeVmRoots asks about the roots' objects, answered from the
// dump's records: the reader noted the DATA records of the VM's buckets
// and of the Ractors by their "struct"; a bucket's references are its
// record's "references" (as dump indices by now).
class DumpVmRootsHeap : public roots::VmRootsHeap {
 public:
  DumpVmRootsHeap(const DumpHeap& heap, const AddressIndex& index, const BigArray<uint32_t>& refs)
      : heap_(heap), refs_(refs) {
    for (uint64_t a : heap.pinned_object_lists) Add(&buckets_, index.Find(a));
    for (uint64_t a : heap.ractors) Add(&ractors_, index.Find(a));
  }
  bool IsPinnedObjectList(uint64_t i) override { return Has(buckets_, i); }
  bool IsRactor(uint64_t i) override { return Has(ractors_, i); }
  void BucketReferences(uint64_t i, std::vector<uint64_t>* out) override {
    for (uint32_t r = heap_.ref_begin[i], end = heap_.ref_begin[i + 1]; r < end; r++)
      if (refs_[r] != kMissing) out->push_back(refs_[r]);
  }

 private:
  // A handful of records: a sorted vector.
  static void Add(std::vector<uint32_t>* set, uint32_t i) {
    if (i == kMissing) return;
    set->insert(std::upper_bound(set->begin(), set->end(), i), i);
  }
  static bool Has(const std::vector<uint32_t>& set, uint64_t i) { return std::binary_search(set.begin(), set.end(), i); }

  const DumpHeap& heap_;
  const BigArray<uint32_t>& refs_;
  std::vector<uint32_t> buckets_, ractors_;
};

}  // namespace

HeapGraph BuildDumpGraph(DumpHeap& heap, DumpGraphStats* stats) {
  DumpGraphStats local;
  if (!stats) stats = &local;
  *stats = DumpGraphStats{};
  const size_t n = heap.size();
  if (heap.klass.size() != n || heap.memsize.size() != n || heap.type.size() != n || heap.name.size() != n ||
      heap.ref_begin.size() != n + 1 || heap.ref_begin[n] != heap.refs.size())
    throw std::logic_error("BuildDumpGraph: an incomplete DumpHeap");
  HeapGraphParts g;
  size_t peak = 0;
  auto note_peak = [&](size_t extra) { peak = std::max(peak, heap.MemoryBytes() + extra); };
  auto dangling = [&](uint64_t a) {
    if (!stats->dangling_references++) stats->first_dangling_address = a;
  };

  // 1. References to 4-byte dump indices, in place (kMissing: dangling).
  const size_t m = heap.refs.size();
  BigArray<uint32_t> refs;
  // Root categories with their references as dump indices.
  std::vector<roots::RootCategoryRefs> categories(heap.roots.size());
  std::vector<uint32_t> class_names;
  {
    AddressIndex index(heap.address);
    note_peak(index.MemoryBytes());
    char* bytes = reinterpret_cast<char*>(heap.refs.data());
    for (size_t r = 0; r < m; r++) {
      uint64_t a;
      std::memcpy(&a, bytes + 8 * r, 8);  // read before the write below (4r < 8r + 8)
      uint32_t i = index.Find(a);
      if (i == kMissing) dangling(a);
      std::memcpy(bytes + 4 * r, &i, 4);
    }
    refs = std::move(heap.refs).Recast<uint32_t>(m);
    for (size_t c = 0; c < heap.roots.size(); c++) {
      categories[c].name = heap.roots[c].name;
      for (uint64_t a : heap.roots[c].refs) {
        uint32_t i = index.Find(a);
        if (i == kMissing) dangling(a);
        else categories[c].refs.push_back(i);
      }
      std::vector<uint64_t>().swap(heap.roots[c].refs);
    }
    // Ruby 3.4's vm root in 3.3's shape, as the in-process walk gives it.
    DumpVmRootsHeap vm_heap(heap, index, refs);
    roots::ReshapeVmRoots(&categories, vm_heap);
    ClassNames names(heap, index, g.names);
    class_names.resize(n);  // transient: per dump index (freed below)
    for (size_t i = 0; i < n; i++) class_names[i] = names.Of(heap.type[i], heap.klass[i]);
    heap.klass.Free();
    note_peak(index.MemoryBytes() + refs.MemoryBytes() + CapacityBytes(class_names));
  }

  // 2. Breadth-first walk over indices: node 0 the super-root, 1..k the
  // categories in first-appearance order, then objects as discovered, each
  // object's references as its edges, in the dump's order: the numbering
  // HeapGraphBuilder gives the in-process walk.
  const uint32_t k = static_cast<uint32_t>(categories.size());
  const uint32_t first_object = k + 1;
  BigArray<uint32_t> node_of;  // dump index -> node
  node_of.assign(n, kMissing);
  std::vector<uint32_t> order;  // node -> dump index (the BFS queue)
  order.reserve(first_object + n);
  order.assign(first_object, kMissing);
  g.tree_parent.reserve(first_object + n);
  g.edge_begin.reserve(first_object + n + 1);
  size_t root_edges = 0;
  for (const auto& c : categories) root_edges += c.refs.size();
  g.edge_target.reserve(k + root_edges + m);
  g.tree_parent.push_back(0);
  g.edge_begin.push_back(0);
  for (uint32_t c = 1; c <= k; c++) {
    g.tree_parent.push_back(0);
    g.edge_target.push_back(c | HeapGraphParts::kTreeEdgeBit);
  }
  auto edge_to = [&](uint32_t source, uint32_t i) {
    uint32_t t = node_of[i];
    if (t == kMissing) {
      t = static_cast<uint32_t>(order.size());
      node_of[i] = t;
      order.push_back(i);
      g.tree_parent.push_back(source);
      g.edge_target.push_back(t | HeapGraphParts::kTreeEdgeBit);
    } else {
      g.edge_target.push_back(t);
    }
  };
  for (uint32_t c = 1; c <= k; c++) {
    g.edge_begin.push_back(static_cast<uint32_t>(g.edge_target.size()));
    for (uint64_t i : categories[c - 1].refs) edge_to(c, static_cast<uint32_t>(i));
    std::vector<uint64_t>().swap(categories[c - 1].refs);
  }
  for (uint32_t v = first_object; v < order.size(); v++) {
    g.edge_begin.push_back(static_cast<uint32_t>(g.edge_target.size()));
    uint32_t i = order[v];
    for (uint32_t r = heap.ref_begin[i], end = heap.ref_begin[i + 1]; r < end; r++)
      if (refs[r] != kMissing) edge_to(v, refs[r]);
  }
  const uint32_t nodes = static_cast<uint32_t>(order.size());
  g.edge_begin.push_back(static_cast<uint32_t>(g.edge_target.size()));
  g.category_count = k;
  note_peak(refs.MemoryBytes() + node_of.MemoryBytes() + CapacityBytes(order) + CapacityBytes(class_names) +
            CapacityBytes(g.tree_parent) + CapacityBytes(g.edge_begin) + CapacityBytes(g.edge_target));
  refs.Free();
  heap.ref_begin.Free();
  g.edge_target.shrink_to_fit();  // dangling references were counted in m: a copy only when there are some

  // Objects no root reaches: garbage the dump was taken before collecting.
  stats->unreachable_objects = n - (nodes - first_object);
  if (stats->unreachable_objects)
    for (size_t i = 0; i < n; i++)
      if (node_of[i] == kMissing) stats->unreachable_bytes += heap.memsize[i];
  node_of.Free();

  // 3. Per-node arrays in BFS order; each dump array is freed once copied.
  g.address.resize(nodes);
  for (uint32_t v = first_object; v < nodes; v++) g.address[v] = heap.address[order[v]];
  g.self_size.resize(nodes);
  for (uint32_t v = first_object; v < nodes; v++) g.self_size[v] = heap.memsize[order[v]];
  heap.memsize.Free();
  g.class_name.resize(nodes);
  for (uint32_t v = first_object; v < nodes; v++) g.class_name[v] = class_names[order[v]];
  std::vector<uint32_t>().swap(class_names);
  g.type.resize(nodes);
  for (uint32_t v = first_object; v < nodes; v++) g.type[v] = heap.type[order[v]];

  // 4. Tree edge names (what the report prints for each hop).
  g.edge_name.assign(nodes, 0);
  for (uint32_t c = 1; c <= k; c++) g.edge_name[c] = g.names.Intern(categories[c - 1].name);
  std::vector<uint32_t> in_names(k + 1, 0);
  for (uint32_t c = 1; c <= k; c++) in_names[c] = g.names.Intern("in " + categories[c - 1].name);
  // The most common string prefixes name strings; the rest do not.
  std::vector<uint32_t> kept_prefix(heap.prefixes.size(), 0);  // prefix id -> graph name id; 0: not kept
  {
    std::vector<uint32_t> ids;
    for (uint32_t p = 1; p < heap.prefixes.size(); p++)
      if (heap.prefix_count[p]) ids.push_back(p);
    size_t keep = std::min<size_t>(ids.size(), DumpHeap::kMaxNamedPrefixes);
    std::partial_sort(ids.begin(), ids.begin() + keep, ids.end(), [&](uint32_t a, uint32_t b) {
      return heap.prefix_count[a] != heap.prefix_count[b] ? heap.prefix_count[a] > heap.prefix_count[b] : a < b;
    });
    for (size_t j = 0; j < keep; j++) kept_prefix[ids[j]] = g.names.Intern(heap.prefixes.Get(ids[j]));
    stats->string_prefixes = ids.size();
    stats->named_string_prefixes = keep;
  }
  std::vector<uint32_t> module_name(heap.names.size(), 0);  // heap name id -> graph id of the name
  std::vector<uint32_t> in_module(heap.names.size(), 0);    // heap name id -> "in <name>"
  auto module_name_of = [&](uint32_t i) -> uint32_t {
    uint32_t h = heap.name[i];
    if (h == 0) return 0;
    if (!module_name[h]) module_name[h] = g.names.Intern(heap.names.Get(h));
    return module_name[h];
  };
  std::unordered_map<uint32_t, uint32_t> via_ids;        // class name id -> "via <class>" id
  std::unordered_map<uint64_t, uint32_t> string_edges;   // (edge id, prefix id) -> "<edge> <prefix>" id
  for (uint32_t v = first_object; v < nodes; v++) {
    uint32_t i = order[v];
    uint8_t type = g.type[v];
    uint32_t name = 0;
    if (type == kDumpClass || type == kDumpModule) name = module_name_of(i);
    if (name != 0) {
      g.edge_name[v] = name;  // a class or module by its own name
      continue;
    }
    uint32_t parent = g.tree_parent[v];
    uint32_t edge;
    if (parent <= k) {
      edge = in_names[parent];
    } else if ((g.type[parent] == kDumpClass || g.type[parent] == kDumpModule) && heap.name[order[parent]] != 0) {
      uint32_t h = heap.name[order[parent]];
      if (!in_module[h]) in_module[h] = g.names.Intern("in " + std::string(heap.names.Get(h)));
      edge = in_module[h];
    } else {
      uint32_t cls = g.class_name[parent];
      auto it = via_ids.find(cls);
      edge = it != via_ids.end() ? it->second : via_ids.emplace(cls, g.names.Intern("via " + g.names.Get(cls))).first->second;
    }
    // A string keeps its referrer and adds its prefix: via Hash "session-…"
    uint32_t prefix = type == kDumpString && heap.name[i] != 0 ? kept_prefix[heap.name[i]] : 0;
    if (prefix != 0) {
      uint64_t key = uint64_t{edge} << 32 | prefix;
      auto it = string_edges.find(key);
      edge = it != string_edges.end()
                 ? it->second
                 : string_edges.emplace(key, g.names.Intern(g.names.Get(edge) + " " + g.names.Get(prefix))).first->second;
    }
    g.edge_name[v] = edge;
  }
  std::vector<uint32_t>().swap(order);
  stats->peak_bytes = peak;
  return HeapGraph::FromParts(std::move(g));
}

}  // namespace fathom
