// Retention profile: the heap as a pprof profile whose "call stacks" are
// dominator-tree paths, so that a flame graph answers "what keeps this
// memory alive".
//
// Every reachable object (but the profiler's own: see Roles below) is
// charged exactly once, as one sample (merged with
// the samples of objects that have the same stack) whose stack is its path in
// the dominator tree: leaf = the object itself, then idom(object),
// idom(idom(object)), ... down to the root category node when it is on the
// path (a node reachable from two categories is dominated by the super-root
// only, so its path has no category frame). The super-root is never a frame.
// Values per object: inuse_objects = 1, inuse_space = its self size,
// retained_space = its retained size, or 0 when one of its dominators has
// the same frame name (that one's retained size already holds it).
//
// Why the dominator path and not, say, the shortest path from a root: the
// objects whose stack passes through a frame F (at a given position of the
// flame graph) are exactly the objects dominated by the objects whose own
// stack ends at F. So inuse_space's *cumulative* value at F is the retained
// size of those objects: the flame graph's widths are retained sizes, and the
// self sizes add up without double counting (each object is in one sample).
// With shortest paths (or any other spanning tree) a width would only be
// "bytes first reached through here", not bytes freed if F let go. In
// `pprof -top`, whose cum counts each sample once per function name, the cum
// of a name is likewise the retained size of the set of all objects shown
// under that name (dominator subtrees are nested or disjoint, so a union
// never double counts). retained_space is to be read *flat* (at the leaf):
// per frame name it sums the retained sizes of the outermost objects of
// that name on each path, i.e. the retained size of all objects of that
// name, never more than the heap. (Each object's own retained size would
// not do: along a 100k-node linked list, ".next (Node)" recurs on every
// path and the sum would count the list's tail 100k times over — 372 GB
// "retained" on a 46 MB heap.) Its cum adds a retained size to those of
// other frames' objects that already include it, and is meaningless. It is
// there so that `-sample_index=retained_space -top` ranks by what is
// retained.
//
// Frame names (one pprof Function + Location per distinct name):
//   object    "<edge name> (<Class>)", the edge name being that of the edge
//             from the object's BFS tree parent (HeapGraph::edge_name), e.g.
//             "@cache (Hash)", "[0] (String)"; "(<Class>)" when unnamed.
//             When the tree parent is not the idom, the hops of the tree path
//             from the idom down to the object are joined with " → " (that
//             path always runs through the idom: see heap_graph.h), e.g.
//             "{a} → @config (Config)"; more than 8 hops keep the last 8
//             after "… → ". An unnamed hop is "?", an unknown class "?".
//   category  "(root: <category>)", e.g. "(root: global_tbl)".
//   elided    "(… N more)": see max_depth. N is exact below 16 and rounded
//             down to a power of two above ("(… 1024+ more)"), so that the
//             deep nodes of a long linked list collapse into a few dozen
//             samples instead of one distinct stack per node.
//
// Roles (HeapGraph::is_own, is_internal): the profiler's own objects get
// no sample (they are counted in the stats only); their frames still
// appear on the stacks of program objects only they lead to
// (HeapGraphBuilder::AddProgramEdgeTo). A runtime internal that no
// internal dominates, and every object it dominates (but own ones), get
// the one-frame stack [internals_frame]: a row of its own at the top of
// the flame graph, out of the program's stacks, whose inuse_space is all
// the internals' bytes. Values and retained sizes follow RetainedSizes on
// a HeapGraph (dominators.h): a program frame's cum is the retained size
// of its objects without the internals and the profiler's objects under
// them.
//
// Cost: stacks are interned incrementally in dominator-tree preorder (node
// index order: see heap_graph.h), stack(node) = intern(stack(idom(node)),
// frame(node)) in a (parent stack, location) -> stack table, and values are
// summed per stack, so no per-node vectors are materialized. Frame strings
// are built once per distinct frame. PprofBuilder writes the string table,
// functions, locations and header; the samples, distinct by construction,
// are appended straight to its output (see the .cc). Working memory: 12
// bytes per node (stack id, depth, location; freed before output) and, for
// retained_space's depth-first walk, 16 more while it runs; ~40 bytes per
// distinct stack, then the uncompressed profile and the gzipped one.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "encode/output_stamp.h"
#include "retention/heap_graph.h"

namespace fathom {

struct RetentionProfileOptions {
  // Stacks deeper than this keep their max_depth - 2 frames nearest the
  // roots, then one "(… N more)" frame, then the leaf. 0 = no cap; else >= 3.
  uint32_t max_depth = 64;
  int64_t time_nanos = 0;      // when the snapshot was taken, ns since the epoch
  int64_t duration_nanos = 0;  // how long taking it took
  std::string comment;         // optional; stored as a profile comment
  std::vector<std::string> more_comments;  // stored after it, in order
  // The frame of the one row that holds the runtime internals (see above).
  std::string internals_frame = "Ruby internals: compiled code, method caches";
  // zlib level. 1 by default: on a 1M-object heap it compresses ~4x faster
  // than 6 for a file ~10% bigger, and the caller is usually waiting.
  int gzip_level = 1;
  // Who wrote it (pid, hostname, Ruby, window; core/encode/output_stamp.h),
  // for a profile that leaves the process. pprof output only.
  OutputStamp stamp;
};

struct RetentionProfileStats {
  size_t objects = 0;    // objects charged (reachable object nodes)
  size_t stacks = 0;     // distinct (capped) stacks, prefixes included
  size_t samples = 0;    // pprof samples (stacks ending at an object)
  size_t locations = 0;  // distinct frame names
  // Peak of this encoder's own memory: its tables, then tables + the
  // uncompressed output (PprofBuilder's small tables not counted).
  size_t peak_bytes = 0;
  // The profiler's own objects (not charged, not in `objects`), and the
  // objects charged to the internals row (in `objects`).
  size_t own_objects = 0;
  uint64_t own_bytes = 0;
  size_t internal_objects = 0;
  uint64_t internal_bytes = 0;
};

// The sample types, in order, and the default one.
inline constexpr const char* kRetentionSampleTypes[3][2] = {
    {"inuse_objects", "count"}, {"inuse_space", "bytes"}, {"retained_space", "bytes"}};
inline constexpr const char* kRetentionDefaultSampleType = "inuse_space";

// Gzipped pprof bytes. idom and retained come from ComputeDominators and
// RetainedSizes on g. Throws std::invalid_argument on a bad max_depth or
// arrays that do not match g. Deterministic: the same inputs give the same
// bytes.
std::string EncodeRetentionProfile(const HeapGraph& g, const MappedVector<uint32_t>& idom,
                                   const MappedVector<uint64_t>& retained, const RetentionProfileOptions& options = {},
                                   RetentionProfileStats* stats = nullptr);

// The frame name of node, as in the profile ("(roots)" for the
// super-root). With DominatorPath (dominators.h) this prints what retains an
// object: FrameName of each node of DominatorPath(idom, node).
std::string FrameName(const HeapGraph& g, const MappedVector<uint32_t>& idom, uint32_t node);

}  // namespace fathom
