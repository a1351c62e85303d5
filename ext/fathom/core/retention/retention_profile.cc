#include "retention/retention_profile.h"

#include <algorithm>
#include <stdexcept>
#include <string_view>
#include <unordered_map>

#include "retention/dominators.h"
#include "base/hash_util.h"
#include "encode/gzip.h"
#include "encode/pprof_builder.h"
#include "encode/pprof_schema.h"
#include "encode/protobuf_writer.h"
#include "stacks/pprof_locations.h"

namespace fathom {
namespace {

constexpr uint32_t kNone = UINT32_MAX;
constexpr uint32_t kMaxHops = 8;
constexpr std::string_view kArrow = " \u2192 ";
constexpr std::string_view kEllipsis = "\u2026";

// A growable array in fixed 64K-element chunks: growing never copies and
// overshoots by less than a chunk, where a std::vector's doubling can leave
// half its capacity unused (the stack tables grow to ~0.5M entries, and
// their size is not known in advance).
template <typename T>
class ChunkedVector {
 public:
  size_t size() const { return size_; }
  T& operator[](size_t i) { return chunks_[i >> kShift][i & kMask]; }
  const T& operator[](size_t i) const { return chunks_[i >> kShift][i & kMask]; }
  T& back() { return (*this)[size_ - 1]; }
  void push_back(const T& x) {
    if ((size_ & kMask) == 0) {
      chunks_.emplace_back();
      chunks_.back().reserve(kMask + 1);
    }
    chunks_.back().push_back(x);
    size_++;
  }
  size_t MemoryBytes() const { return chunks_.size() * (kMask + 1) * sizeof(T) + chunks_.capacity() * sizeof(void*); }
  void Clear() {
    MappedVector<MappedVector<T>>().swap(chunks_);
    size_ = 0;
  }

 private:
  static constexpr size_t kShift = 16, kMask = (size_t{1} << kShift) - 1;
  MappedVector<MappedVector<T>> chunks_;
  size_t size_ = 0;
};

// Interns pairs of 32-bit values as dense ids 0, 1, 2, ...: the tables of
// hop paths, frames and stacks below are all tries or pair keys. Open
// addressing over ids, the keys read from the id-indexed array (4 bytes a
// slot), load <= 0.6.
class PairTable {
 public:
  PairTable() : slots_(64, kNone) {}

  uint32_t Intern(uint32_t a, uint32_t b, bool* created = nullptr) {
    if ((keys_.size() + 1) * 5 > slots_.size() * 3) Grow();
    const uint64_t key = Key(a, b);
    size_t mask = slots_.size() - 1;
    size_t i = Mix64(key) & mask;
    for (;; i = (i + 1) & mask) {
      uint32_t id = slots_[i];
      if (id == kNone) break;
      if (keys_[id] == key) {
        if (created != nullptr) *created = false;
        return id;
      }
    }
    uint32_t id = static_cast<uint32_t>(keys_.size());
    keys_.push_back(key);
    slots_[i] = id;
    if (created != nullptr) *created = true;
    return id;
  }

  uint32_t first(uint32_t id) const { return static_cast<uint32_t>(keys_[id] >> 32); }
  uint32_t second(uint32_t id) const { return static_cast<uint32_t>(keys_[id]); }
  size_t size() const { return keys_.size(); }
  size_t MemoryBytes() const { return keys_.MemoryBytes() + slots_.capacity() * sizeof(uint32_t); }
  void Clear() {
    keys_.Clear();
    MappedVector<uint32_t>().swap(slots_);
  }

 private:
  // Both halves in one word: a probe compares one load, not two.
  static uint64_t Key(uint32_t a, uint32_t b) { return (static_cast<uint64_t>(a) << 32) | b; }

  void Grow() {
    slots_.assign(slots_.size() * 2, kNone);
    size_t mask = slots_.size() - 1;
    for (uint32_t id = 0; id < keys_.size(); id++) {
      size_t i = Mix64(keys_[id]) & mask;
      while (slots_[i] != kNone) i = (i + 1) & mask;
      slots_[i] = id;
    }
  }

  ChunkedVector<uint64_t> keys_;  // id -> (a, b)
  MappedVector<uint32_t> slots_;  // open addressing over ids
};

// The hops naming an object's frame: the nodes of the BFS tree path from
// idom(node) (excluded) down to node, at most kMaxHops of them, nearest the
// node kept. Returned leaf first; *truncated when hops were left out.
size_t TreeHops(const HeapGraph& g, uint32_t dominator, uint32_t node, uint32_t (&hops)[kMaxHops], bool* truncated) {
  size_t k = 0;
  *truncated = false;
  for (uint32_t u = node;;) {
    hops[k++] = u;
    uint32_t p = g.tree_parent(u);
    // p == u only at the super-root: stops the walk even for an idom that
    // is not on the tree path (not the case for a real dominator).
    if (p == dominator || p == u) break;
    if (k == kMaxHops) {
      *truncated = true;
      break;
    }
    u = p;
  }
  return k;
}

void AppendHop(const HeapGraph& g, uint32_t edge_name, std::string& out) {
  const std::string& s = g.name(edge_name);
  out += s.empty() ? std::string_view("?") : std::string_view(s);
}

// "<path> (<Class>)" or "(<Class>)": path is "" or the joined hops.
std::string ObjectFrameName(const HeapGraph& g, std::string path, uint32_t class_name) {
  const std::string& cls = g.name(class_name);
  if (!path.empty()) path += ' ';
  path += '(';
  path += cls.empty() ? std::string_view("?") : std::string_view(cls);
  path += ')';
  return path;
}

std::string CategoryFrameName(const HeapGraph& g, uint32_t node) {
  return "(root: " + g.name(g.edge_name(node)) + ")";
}

// How many elided frames a "(… N more)" frame claims: exact below 16, else
// rounded down to a power of two (marked with "+" when the name is made).
uint32_t ElidedBucket(uint32_t n) {
  if (n < 16) return n;
  uint32_t p = 16;
  while (p <= n / 2) p *= 2;
  return p;
}

std::string ElidedFrameName(uint32_t bucket) {
  return "(" + std::string(kEllipsis) + " " + std::to_string(bucket) + (bucket >= 16 ? "+" : "") + " more)";
}

// Walks the dominator tree depth first, keeping how many objects of each
// frame (location id) are open on the current path, and calls
// charge(v, retained[v]) for every object no dominator of which has v's
// frame. The profiler's own objects are charged nothing and open no frame. Such an outer object's retained size already holds the inner
// ones', so summing the charged sizes per frame gives the retained size of
// the union of that frame's objects: at most the heap, where summing every
// object's would count a 100k-node linked list's tail 100k times over. The
// tree is a CSR built from idom (children of u in children[begin[u] ..
// begin[u+1])); the DFS needs no recursion (a chain is as deep as the heap
// is big). Returns its working memory in bytes.
template <typename LocationOf, typename Charge>
size_t ChargeOutermostRetained(const MappedVector<uint32_t>& idom, const MappedVector<uint64_t>& retained,
                               size_t location_count, const HeapGraph& g, LocationOf location_of, Charge charge) {
  const uint32_t n = static_cast<uint32_t>(idom.size());
  MappedVector<uint32_t> begin(size_t{n} + 1, 0);
  for (uint32_t v = 1; v < n; v++)
    if (idom[v] != kUnreachable) begin[idom[v] + 1]++;
  for (uint32_t u = 0; u < n; u++) begin[u + 1] += begin[u];
  MappedVector<uint32_t> cursor(begin.begin(), begin.end() - 1);
  MappedVector<uint32_t> children(begin[n]);
  for (uint32_t v = 1; v < n; v++)
    if (idom[v] != kUnreachable) children[cursor[idom[v]]++] = v;
  // cursor[u] now ends u's children: the DFS walks them backwards.
  MappedVector<uint32_t> open(location_count + 1, 0);  // location ids start at 1
  MappedVector<uint32_t> path{HeapGraph::kSuperRoot};
  size_t max_path = 1;
  while (!path.empty()) {
    uint32_t u = path.back();
    if (cursor[u] == begin[u]) {
      path.pop_back();
      if (u != HeapGraph::kSuperRoot) open[g.is_own(u) ? 0 : location_of(u)]--;
      continue;
    }
    uint32_t v = children[--cursor[u]];
    uint32_t loc = g.is_own(v) ? 0 : location_of(v);  // 0: no location, never charged
    if (loc != 0 && !g.is_virtual(v) && open[loc] == 0) charge(v, retained[v]);
    open[loc]++;
    path.push_back(v);
    max_path = std::max(max_path, path.size());
  }
  return CapacityBytes(begin) + CapacityBytes(cursor) + CapacityBytes(children) + CapacityBytes(open) +
         max_path * sizeof(uint32_t);
}

}  // namespace

std::string FrameName(const HeapGraph& g, const MappedVector<uint32_t>& idom, uint32_t node) {
  if (node >= g.node_count()) throw std::invalid_argument("FrameName: node out of range");
  if (node == HeapGraph::kSuperRoot) return "(roots)";
  if (g.is_category(node)) return CategoryFrameName(g, node);
  if (idom.size() != g.node_count()) throw std::invalid_argument("FrameName: idom does not match the graph");
  uint32_t d = idom[node];
  uint32_t hops[kMaxHops];
  bool truncated = false;
  size_t k = d == kUnreachable ? 0 : TreeHops(g, d, node, hops, &truncated);
  if (k == 0) {  // unreachable (not in a HeapGraph): the edge it was found by
    hops[0] = node;
    k = 1;
  }
  std::string path;
  if (k == 1 && !truncated) {
    path = g.name(g.edge_name(node));
  } else {
    if (truncated) {
      path += kEllipsis;
      path += kArrow;
    }
    for (size_t i = k; i-- > 0;) {
      AppendHop(g, g.edge_name(hops[i]), path);
      if (i > 0) path += kArrow;
    }
  }
  return ObjectFrameName(g, std::move(path), g.class_name(node));
}

std::string EncodeRetentionProfile(const HeapGraph& g, const MappedVector<uint32_t>& idom,
                                   const MappedVector<uint64_t>& retained, const RetentionProfileOptions& options,
                                   RetentionProfileStats* stats) {
  const uint32_t n = g.node_count();
  if (idom.size() != n) throw std::invalid_argument("EncodeRetentionProfile: idom does not match the graph");
  if (retained.size() != n) throw std::invalid_argument("EncodeRetentionProfile: retained does not match the graph");
  const uint32_t max_depth = options.max_depth;
  if (max_depth != 0 && max_depth < 3)
    throw std::invalid_argument("max_depth must be 0 (no limit) or at least 3, got " + std::to_string(max_depth));
  if (options.gzip_level < 0 || options.gzip_level > 9)
    throw std::invalid_argument("gzip_level must be between 0 and 9, got " + std::to_string(options.gzip_level));

  std::vector<ValueType> types;
  for (const auto& t : kRetentionSampleTypes) types.push_back(ValueType{t[0], t[1]});
  PprofBuilder b(types, ValueType{"space", "bytes"}, 1);
  b.set_default_sample_type(kRetentionDefaultSampleType);
  b.set_time(options.time_nanos, options.duration_nanos);
  if (!options.comment.empty()) b.add_comment(options.comment);
  for (const std::string& c : options.more_comments) b.add_comment(c);
  ApplyOutputStamp(options.stamp, b);

  PprofLocations locations(b);  // every frame here is a name (see the header)
  auto new_location = [&](const std::string& name) { return static_cast<uint32_t>(locations.Named(name)); };

  // Frames. An object's frame is keyed by (path key, class) where the path
  // key is the edge name id itself for the common one-hop case, and a hop
  // path id (tagged with the top bit; edge name ids stay far below 2^31)
  // from a trie of (previous path, edge name) otherwise. The string is only
  // built when a key is new.
  constexpr uint32_t kPathTag = 1u << 31;
  constexpr uint32_t kPathStart = kNone;      // the trie's root
  constexpr uint32_t kEllipsisHop = kNone;    // "…" as the first hop
  if (g.names().size() >= kPathTag) throw std::invalid_argument("EncodeRetentionProfile: too many names");
  PairTable paths;             // (previous path id or kPathStart, edge name id or kEllipsisHop) -> path id
  PairTable frames;            // (path key, class name id) -> frame id
  MappedVector<uint32_t> frame_location;  // frame id -> pprof location id
  std::unordered_map<uint32_t, uint32_t> elided_location;  // ElidedBucket -> location id
  MappedVector<uint32_t> category_location(g.category_count());
  for (uint32_t c = 1; c <= g.category_count(); c++) category_location[c - 1] = new_location(CategoryFrameName(g, c));

  auto path_string = [&](uint32_t path_id) {
    MappedVector<uint32_t> hops;  // leaf first
    for (uint32_t p = path_id; p != kPathStart; p = paths.first(p)) hops.push_back(paths.second(p));
    std::string s;
    for (size_t i = hops.size(); i-- > 0;) {
      if (hops[i] == kEllipsisHop)
        s += kEllipsis;
      else
        AppendHop(g, hops[i], s);
      if (i > 0) s += kArrow;
    }
    return s;
  };

  auto object_location = [&](uint32_t node, uint32_t dominator) {
    uint32_t key;
    if (g.tree_parent(node) == dominator) {
      key = g.edge_name(node);
    } else {
      uint32_t hops[kMaxHops];
      bool truncated;
      size_t k = TreeHops(g, dominator, node, hops, &truncated);
      uint32_t p = truncated ? paths.Intern(kPathStart, kEllipsisHop) : kPathStart;
      for (size_t i = k; i-- > 0;) p = paths.Intern(p, g.edge_name(hops[i]));
      key = kPathTag | p;
    }
    bool created;
    uint32_t frame = frames.Intern(key, g.class_name(node), &created);
    if (created) {
      std::string path = key & kPathTag ? path_string(key & ~kPathTag) : g.name(key);
      frame_location.push_back(new_location(ObjectFrameName(g, std::move(path), g.class_name(node))));
    }
    return frame_location[frame];
  };

  auto elided = [&](uint32_t count) {
    uint32_t bucket = ElidedBucket(count);
    auto it = elided_location.find(bucket);
    if (it != elided_location.end()) return it->second;
    uint32_t loc = new_location(ElidedFrameName(bucket));
    elided_location.emplace(bucket, loc);
    return loc;
  };

  // Stacks, in dominator-tree preorder = node index order (idom(v) < v).
  // A stack id names a trie node: (parent stack id or kEmptyStack, location).
  // Per stack: its values and the encoded size of its location ids, which
  // sizes the output exactly.
  constexpr uint32_t kEmptyStack = kNone;   // the super-root's
  constexpr uint32_t kNoStack = kNone - 1;  // not computed (unreachable node)
  struct StackValues {
    uint64_t space = 0, retained = 0;
    uint32_t objects = 0;
    uint32_t location_bytes = 0;  // varint bytes of its location ids, leaf to root
  };
  PairTable stacks;
  ChunkedVector<StackValues> values;
  auto intern_stack = [&](uint32_t parent, uint32_t loc) {
    bool created;
    uint32_t s = stacks.Intern(parent, loc, &created);
    if (created) {
      values.push_back(StackValues{});
      values.back().location_bytes =
          static_cast<uint32_t>((parent == kEmptyStack ? 0 : values[parent].location_bytes) + ProtoWriter::VarintSize(loc));
    }
    return s;
  };
  // Per node: its stack, its depth in frames (and, in the top bit, whether
  // it is charged to the internals row) and its own frame's location (read
  // together for the idom; the location again by ChargeOutermostRetained).
  struct NodeState {
    uint32_t stack = kNoStack;
    uint32_t depth = 0;
    uint32_t location = 0;
  };
  constexpr uint32_t kInInternals = 1u << 31;
  MappedVector<NodeState> node(n);
  node[HeapGraph::kSuperRoot].stack = kEmptyStack;
  size_t objects = 0;
  uint32_t internals_location = 0, internals_stack = kNoStack;
  RetentionProfileStats counts;
  for (uint32_t v = 1; v < n; v++) {
    uint32_t d = idom[v];
    if (d == kUnreachable) continue;  // not in a HeapGraph, but harmless
    if (d >= v || node[d].stack == kNoStack)
      throw std::invalid_argument("EncodeRetentionProfile: idom[" + std::to_string(v) +
                                  "] is not a dominator computed on this graph");
    const bool own = g.is_own(v);
    if (!own && !g.is_virtual(v) && (g.is_internal(v) || (node[d].depth & kInInternals) != 0)) {
      // The runtime's internals and what only they keep alive (the same
      // grouping as RetainedSizes): one frame of their own at the top,
      // out of the program's stacks.
      if (internals_stack == kNoStack) {
        internals_location = new_location(options.internals_frame);
        internals_stack = intern_stack(kEmptyStack, internals_location);
      }
      node[v] = NodeState{internals_stack, 1 | kInInternals, internals_location};
      objects++;
      counts.internal_objects++;
      counts.internal_bytes += g.self_size(v);
      StackValues& sv = values[internals_stack];
      sv.objects++;
      sv.space += g.self_size(v);
      continue;
    }
    uint32_t dep = (node[d].depth & ~kInInternals) + 1;
    uint32_t loc = g.is_category(v) ? category_location[v - 1] : object_location(v, d);
    uint32_t parent = node[d].stack;
    if (max_depth != 0 && dep > max_depth) {
      // Keep the max_depth - 2 frames nearest the roots: the grandparent of
      // stack(d), whether stack(d) is a full stack of max_depth frames or
      // already capped as [those frames, "(… more)", leaf].
      uint32_t anchor = stacks.first(stacks.first(parent));
      parent = intern_stack(anchor, elided(dep - (max_depth - 1)));
    }
    uint32_t s = intern_stack(parent, loc);
    node[v] = NodeState{s, dep, loc};
    if (g.is_virtual(v)) continue;
    if (own) {
      // Set apart: its frame may still name the path to the program's
      // objects behind it (AddProgramEdgeTo), but it is charged nothing.
      counts.own_objects++;
      counts.own_bytes += g.self_size(v);
      continue;
    }
    objects++;
    StackValues& sv = values[s];
    sv.objects++;
    sv.space += g.self_size(v);
  }
  size_t peak = CapacityBytes(node) + stacks.MemoryBytes() + paths.MemoryBytes() + frames.MemoryBytes() +
                CapacityBytes(frame_location) + values.MemoryBytes();
  paths.Clear();
  frames.Clear();
  ReleaseStorage(frame_location);
  // retained_space: each object's retained size unless a dominator of it
  // has the same frame (see the header).
  peak = std::max(peak, CapacityBytes(node) + stacks.MemoryBytes() + values.MemoryBytes() +
                            ChargeOutermostRetained(idom, retained, b.location_count(), g,
                                                    [&](uint32_t v) { return node[v].location; },
                                                    [&](uint32_t v, uint64_t r) { values[node[v].stack].retained += r; }));
  ReleaseStorage(node);

  // Everything but the samples comes from PprofBuilder. The samples are
  // appended to its output as further Profile.sample fields: a protobuf
  // message's fields may come in any order and repeated ones concatenate,
  // so readers see one profile. The stacks are distinct by construction, so
  // PprofBuilder's sample merging would only cost time and a copy of every
  // stack (with ~500k distinct stacks, 1 s and ~80 bytes per object).
  ProtoWriter out(b.Encode());
  namespace field = pprof_schema;
  size_t samples = 0, sample_bytes = 0;
  auto values_bytes = [](const StackValues& sv) {
    return ProtoWriter::VarintSize(sv.objects) + ProtoWriter::VarintSize(sv.space) +
           ProtoWriter::VarintSize(sv.retained);
  };
  auto body_bytes = [&](const StackValues& sv) {
    size_t ids = sv.location_bytes ? ProtoWriter::LengthDelimitedSize(field::sample::kLocationId, sv.location_bytes) : 0;
    return ids + ProtoWriter::LengthDelimitedSize(field::sample::kValue, values_bytes(sv));
  };
  for (uint32_t s = 0; s < values.size(); s++) {
    const StackValues& sv = values[s];
    if (sv.objects == 0) continue;
    sample_bytes += ProtoWriter::LengthDelimitedSize(field::profile::kSample, body_bytes(sv));
    samples++;
  }
  out.Reserve(out.size() + sample_bytes);
  peak = std::max(peak, stacks.MemoryBytes() + values.MemoryBytes() + out.data().capacity());
  // Each sample's size is known, so its header goes first and nothing moves;
  // location ids and values are packed varints, location ids leaf first.
  for (uint32_t s = 0; s < stacks.size(); s++) {
    const StackValues& sv = values[s];
    if (sv.objects == 0) continue;
    out.LengthDelimitedHeader(field::profile::kSample, body_bytes(sv));
    if (sv.location_bytes != 0) {
      out.LengthDelimitedHeader(field::sample::kLocationId, sv.location_bytes);
      for (uint32_t p = s; p != kEmptyStack; p = stacks.first(p)) out.Varint(stacks.second(p));
    }
    out.LengthDelimitedHeader(field::sample::kValue, values_bytes(sv));
    out.Varint(sv.objects);
    out.Varint(sv.space);
    out.Varint(sv.retained);
  }
  if (stats != nullptr) {
    stats->objects = objects;
    stats->stacks = stacks.size();
    stats->samples = samples;
    stats->locations = b.location_count();
    stats->peak_bytes = peak;
    stats->own_objects = counts.own_objects;
    stats->own_bytes = counts.own_bytes;
    stats->internal_objects = counts.internal_objects;
    stats->internal_bytes = counts.internal_bytes;
  }
  stacks.Clear();
  values.Clear();
  return GzipCompress(out.Take(), options.gzip_level);
}

}  // namespace fathom
