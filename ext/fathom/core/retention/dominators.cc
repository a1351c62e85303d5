#include "retention/dominators.h"

#include <algorithm>
#include <stdexcept>
#include <string>

namespace fathom {
namespace {

constexpr uint32_t kNoVertex = UINT32_MAX;

// Tarjan's eval with path compression, over preorder numbers. Nodes numbered
// >= last are "linked" (already swept); for them anc[] is an ancestor in the
// link forest and label[] the node of smallest semi on the compressed path
// below it. Returns the node of smallest semi on the forest path from v up
// to (excluding) the first unlinked ancestor.
//
// Compression needs the path top-down, which a recursive version gets from
// the call stack and LLVM from an explicit stack. Here the way up reverses
// the anc[] links instead (each points back to the node below), and the way
// down restores them as compressed links: no memory beyond the arrays.
inline uint32_t Eval(uint32_t v, uint32_t last, uint32_t* anc, uint32_t* label, const uint32_t* semi) {
  if (anc[v] < last) return label[v];
  uint32_t below = kNoVertex, x = v;
  while (anc[x] >= last) {  // kNoVertex never appears here: only reversed links hold it
    uint32_t up = anc[x];
    anc[x] = below;
    below = x;
    x = up;
  }
  // x is the topmost linked node of the path; anc[x] the forest root above it.
  uint32_t top = anc[x];
  uint32_t p = x, y = below;
  while (y != kNoVertex) {
    uint32_t next = anc[y];
    anc[y] = top;
    if (semi[label[p]] < semi[label[y]]) label[y] = label[p];
    p = y;
    y = next;
  }
  return label[v];
}

}  // namespace

MappedVector<uint32_t> ComputeDominators(const CsrGraphView& g, uint32_t root, DominatorStats* stats) {
  const uint32_t n = g.node_count;
  if (root >= n) throw std::invalid_argument("ComputeDominators: root " + std::to_string(root) + " out of range");
  const uint32_t* eb = g.edge_begin;
  const uint32_t* et = g.edge_target;
  const uint32_t mask = g.target_mask;

  // --- 1. Depth-first search from the root, numbering nodes in preorder.
  // pre[node] -> preorder number (in `result`, which is free until the end),
  // vertex[number] -> node, parent[number] -> DFS parent's number, and
  // cursor[number] -> next edge to look at. The DFS stack is implicit: the
  // current node's parent chain.
  MappedVector<uint32_t> result(n, kNoVertex);
  uint32_t* pre = result.data();
  MappedVector<uint32_t> vertex(n), parent(n), semi(n);
  uint32_t* cursor = semi.data();  // becomes semi after the DFS
  uint32_t count = 1;
  pre[root] = 0;
  vertex[0] = root;
  parent[0] = 0;
  cursor[0] = eb[root];
  for (uint32_t cur = 0;;) {
    uint32_t u = vertex[cur];
    if (cursor[cur] < eb[u + 1]) {
      uint32_t t = et[cursor[cur]++] & mask;
      if (t >= n) throw std::invalid_argument("ComputeDominators: edge target " + std::to_string(t) + " out of range");
      if (pre[t] == kNoVertex) {
        pre[t] = count;
        vertex[count] = t;
        parent[count] = cur;
        cursor[count] = eb[t];
        cur = count++;
      }
    } else {
      if (cur == 0) break;
      cur = parent[cur];
    }
  }
  const uint32_t reached = count;

  // --- 2. Predecessor lists in preorder numbers (CSR), keeping only the
  // entries that can lower a semidominator: a predecessor numbered i < w is
  // not yet swept when w is, so it offers exactly i, which is no better than
  // the initial semi[w] = parent[w] when parent[w] <= i. So edges with
  // parent[w] <= i <= w (the tree edge, its duplicates, self edges, ...) and
  // edges into the root are dropped. Sources are scanned in preorder, so
  // every list is sorted.
  auto kept = [&](uint32_t i, uint32_t w) { return w != 0 && !(parent[w] <= i && i <= w); };
  MappedVector<uint32_t> pred_begin(reached + 1, 0);
  for (uint32_t i = 0; i < reached; i++) {
    uint32_t u = vertex[i];
    for (uint32_t e = eb[u]; e < eb[u + 1]; e++) {
      uint32_t w = pre[et[e] & mask];
      if (kept(i, w)) pred_begin[w + 1]++;
    }
  }
  for (uint32_t w = 0; w < reached; w++) pred_begin[w + 1] += pred_begin[w];
  MappedVector<uint32_t> preds(pred_begin[reached]);
  for (uint32_t i = 0; i < reached; i++) {
    uint32_t u = vertex[i];
    for (uint32_t e = eb[u]; e < eb[u + 1]; e++) {
      uint32_t w = pre[et[e] & mask];
      if (kept(i, w)) preds[pred_begin[w]++] = i;  // pred_begin[w] ends up at w's end...
    }
  }
  for (uint32_t w = reached; w > 0; w--) pred_begin[w] = pred_begin[w - 1];  // ...so shift back
  pred_begin[0] = 0;
  if (stats != nullptr) {
    stats->reachable = reached;
    stats->predecessor_entries = preds.size();
    stats->peak_bytes = (result.capacity() + vertex.capacity() + parent.capacity() + semi.capacity() +
                         pred_begin.capacity() + preds.capacity()) * sizeof(uint32_t);
  }

  // --- 3. Semidominators, sweeping preorder numbers downwards. `result` is
  // now free (preds are in numbers) and holds the eval labels; parent[]
  // becomes the link forest's ancestor array (node w is linked once the
  // sweep passes below it). Once w is swept, its predecessor range is dead,
  // so pred_begin[w + 1] stores w's DFS parent, still intact at that moment
  // (compression only rewrites anc[x] when x's ancestor is linked, i.e. when
  // the sweep is below parent[x] < x): pred_begin[1..] becomes the idom
  // array that step 4 starts from, with no array of its own.
  uint32_t* label = result.data();
  uint32_t* anc = parent.data();
  for (uint32_t i = 0; i < reached; i++) {
    label[i] = i;
    semi[i] = i;
  }
  for (uint32_t w = reached - 1; w >= 1; w--) {
    uint32_t s = anc[w];  // the DFS parent (w is not linked yet)
    for (uint32_t k = pred_begin[w], end = pred_begin[w + 1]; k < end; k++) {
      uint32_t v = preds[k];
      // A predecessor not swept yet (v < w) is its own label with semi v.
      uint32_t candidate = v < w ? v : semi[Eval(v, w + 1, anc, label, semi.data())];
      if (candidate < s) s = candidate;
    }
    semi[w] = s;
    pred_begin[w + 1] = anc[w];
  }
  ReleaseStorage(preds);
  ReleaseStorage(parent);

  // --- 4. idom(w) = nearest common ancestor of the DFS parent and semi(w)
  // in the dominator tree built so far: climb from the parent while the
  // candidate is numbered above semi(w).
  uint32_t* idom = pred_begin.data() + 1;
  idom[0] = 0;
  for (uint32_t w = 1; w < reached; w++) {
    uint32_t d = idom[w];
    while (d > semi[w]) d = idom[d];
    idom[w] = d;
  }
  ReleaseStorage(semi);

  // --- 5. Back to node indices.
  std::fill(result.begin(), result.end(), kUnreachable);
  for (uint32_t w = 0; w < reached; w++) result[vertex[w]] = vertex[idom[w]];
  return result;
}

MappedVector<uint32_t> ComputeDominators(const HeapGraph& g, DominatorStats* stats) {
  if (!g.has_edges()) throw std::logic_error("ComputeDominators: the graph's edges were released");
  return ComputeDominators(g.csr(), HeapGraph::kSuperRoot, stats);
}

namespace {

// Retained sizes with self sizes from size_of(node).
template <typename SizeOf>
MappedVector<uint64_t> SumDominatorSubtrees(const MappedVector<uint32_t>& idom, SizeOf size_of) {
  const uint32_t n = static_cast<uint32_t>(idom.size());
  MappedVector<uint64_t> retained(n, 0);
  bool parents_first = true;  // every idom numbered below its node
  for (uint32_t v = 0; v < n; v++) {
    uint32_t d = idom[v];
    if (d == kUnreachable) continue;
    if (d >= n) throw std::invalid_argument("RetainedSizes: idom out of range");
    retained[v] = size_of(v);
    if (d > v) parents_first = false;
  }
  if (parents_first) {
    for (uint32_t v = n; v-- > 0;)
      if (idom[v] != kUnreachable && idom[v] != v) retained[idom[v]] += retained[v];
    return retained;
  }
  // General order: children first, by counting each node's children and
  // starting from the leaves (Kahn's algorithm on the tree).
  MappedVector<uint32_t> pending(n, 0), ready;
  for (uint32_t v = 0; v < n; v++)
    if (idom[v] != kUnreachable && idom[v] != v) pending[idom[v]]++;
  for (uint32_t v = 0; v < n; v++)
    if (idom[v] != kUnreachable && pending[v] == 0) ready.push_back(v);
  while (!ready.empty()) {
    uint32_t v = ready.back();
    ready.pop_back();
    uint32_t d = idom[v];
    if (d == v) continue;  // the root
    retained[d] += retained[v];
    if (--pending[d] == 0) ready.push_back(d);
  }
  return retained;
}

}  // namespace

MappedVector<uint64_t> RetainedSizes(const MappedVector<uint32_t>& idom, const std::vector<uint64_t>& self_sizes) {
  if (self_sizes.size() != idom.size()) throw std::invalid_argument("RetainedSizes: size mismatch");
  return SumDominatorSubtrees(idom, [&](uint32_t v) { return self_sizes[v]; });
}

MappedVector<uint64_t> RetainedSizes(const HeapGraph& g, const MappedVector<uint32_t>& idom) {
  if (idom.size() != g.node_count()) throw std::invalid_argument("RetainedSizes: idom does not match the graph");
  const uint32_t n = g.node_count();
  bool roles = false;
  for (uint32_t v = g.first_object_node(); v < n && !roles; v++) roles = g.is_own(v) || g.is_internal(v);
  if (!roles) return SumDominatorSubtrees(idom, [&](uint32_t v) { return g.self_size(v); });
  // Two groups, the program's and the runtime internals'; a node's group is
  // kept in the top bit of its entry while the sums run (sizes stay far
  // below 2^63). Forward, parents first: a node is in the internals group
  // when it is internal or its idom is, unless it is own (own nodes count
  // 0 and pass their program descendants' sizes on, as program nodes).
  constexpr uint64_t kInternals = uint64_t{1} << 63;
  MappedVector<uint64_t> retained(n, 0);
  for (uint32_t v = 1; v < n; v++) {
    uint32_t d = idom[v];
    if (d == kUnreachable) continue;
    if (d >= v) throw std::invalid_argument("RetainedSizes: an idom that does not precede its node");
    if (g.is_virtual(v)) continue;
    bool own = g.is_own(v);
    bool internals = !own && (g.is_internal(v) || (retained[d] & kInternals) != 0);
    retained[v] = (own ? 0 : g.self_size(v)) | (internals ? kInternals : 0);
  }
  // Backward, children first: a node adds to its idom only within a group.
  for (uint32_t v = n; v-- > 1;) {
    uint32_t d = idom[v];
    if (d == kUnreachable) continue;
    if (((retained[v] ^ retained[d]) & kInternals) == 0) retained[d] += retained[v] & ~kInternals;
  }
  for (uint32_t v = 0; v < n; v++) retained[v] &= ~kInternals;
  return retained;
}

std::vector<uint32_t> DominatorPath(const MappedVector<uint32_t>& idom, uint32_t node) {
  std::vector<uint32_t> path;
  if (node >= idom.size() || idom[node] == kUnreachable) return path;
  path.push_back(node);
  // Bounded by the node count, in case idom is not a tree.
  for (size_t guard = 0; idom[node] != node && guard < idom.size(); guard++) {
    node = idom[node];
    path.push_back(node);
  }
  return path;
}

}  // namespace fathom
