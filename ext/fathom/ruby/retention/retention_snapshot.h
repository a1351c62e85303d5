// Fathom::Native::RetentionSnapshot — the object graph of the running
// process, for "why is this still alive" (retention) analysis. Three files,
// one per phase:
//
//  1. retention_walk.cc (GVL held throughout, GC disabled: the only phase
//     that runs with GC off, and it never lets another thread run). Roots come from
//     rb_objspace_reachable_objects_from_root with Ruby's own category names
//     ("vm", "machine_context", "global_tbl", ...); each object's children
//     from rb_objspace_reachable_objects_from, breadth-first, into the core's
//     HeapGraphBuilder (compact arrays, no Ruby objects). The references
//     of threads and fibers (their stacks) join the walk once everything
//     else is walked, then other objects' references to threads and fibers
//     (a Monitor's owner), and machine_context, the conservative root,
//     last: a stack names only what no constant, ivar or global holds, and
//     is named by its own thread, not by a lock that points at it. Edges
//     into Fathom's own objects (its modules, instances of its classes,
//     its threads: OwnSet) join after all of that: what they alone lead to
//     is set apart, charged to nothing, and their edges back into the
//     program's objects are dropped (HeapGraphBuilder::AddOwnEdgeTo).
//     Imemos that are not a block's env are marked as Ruby internals
//     (their own row in the profile). Both functions are exported by
//     libruby but declared in no installed header: our own prototypes in
//     ruby_private_api.h, behind have_func.
//  2. edge_names.cc (GVL, GC enabled: naming calls Ruby methods, and
//     another thread may run at their interrupt checks). Only the edge that discovered each object (its
//     BFS tree edge, on a shortest path from the roots) needs a name, since
//     those are the edges the reports print. For each referrer, its named
//     slots are listed once through C-level lookups and the *original*
//     methods of Ruby's core classes, captured at load (so no user override
//     of Thread#keys, Proc#binding... runs inside the snapshot), and matched
//     against its tree children by identity.
//  3. retention_snapshot.cc: the Ruby class. Dominators, retained
//     sizes and pprof encoding are pure computation on the core graph, run
//     without the GVL.
//
// By default (take_forked) all three phases run in a forked child on a
// copy-on-write image of the heap, the parent pausing for fork() only:
// forked_snapshot.cc (docs/internals/retention.md, "Forked snapshots").
//
// Safety. During phases 1-2 the graph holds raw VALUEs that nothing else
// keeps alive or in place. GC is disabled during the walk, but GC.start and
// GC.compact run even then, GC runs normally during naming, and naming calls
// Ruby methods at whose interrupt checks another thread could call them. So while the graph holds raw VALUEs, the snapshot
// object's mark function marks (and so pins) every one of them.
// rb_objspace_reachable_objects_from must never be called during GC; it is
// only called from here, with the GVL, outside GC.
#pragma once

#include <ruby.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "retention/heap_graph.h"
#include "retention/retention_profile.h"

namespace fathom {
namespace retention {

constexpr uint32_t kProgressEvery = 1 << 16;

// A small set of VALUEs compared by identity (Fathom's modules and
// classes, its threads): open addressing, looked up once per edge of the
// walk, so a probe is a hash and a load or two. Never erased.
class OwnSet {
 public:
  void Insert(VALUE v);
  bool Contains(VALUE v) const {
    if (size_ == 0) return false;
    size_t mask = slots_.size() - 1;
    for (size_t i = Slot(v) & mask;; i = (i + 1) & mask) {
      if (slots_[i] == v) return true;
      if (slots_[i] == 0) return false;
    }
  }
  bool empty() const { return size_ == 0; }
  size_t size() const { return size_; }
  template <typename F>
  void ForEach(F&& f) const {
    for (VALUE v : slots_)
      if (v != 0) f(v);
  }

 private:
  static size_t Slot(VALUE v) { return static_cast<size_t>((v >> 3) * 0x9E3779B97F4A7C15ull >> 16); }
  std::vector<VALUE> slots_;
  size_t size_ = 0;
};

// What naming needs from Ruby methods for the threads alive and the
// globals, collected before a forked walk (PrepareNames): the child may
// call no method (docs/internals/retention.md, "Forked snapshots").
struct PreparedThread {
  VALUE thread = Qnil;
  std::string label;  // ThreadLabel
  std::vector<std::pair<VALUE, std::string>> locals;     // fiber locals: value, "thread[:key]"
  std::vector<std::pair<VALUE, std::string>> variables;  // value, "thread_variable[:key]"
};

// Everything a snapshot holds, owned by the Ruby object (so a longjmp out of
// a phase leaks nothing: the state is here, not on the C++ stack).
struct Snapshot {
  VALUE self = Qnil;
  int max_depth = 64;
  // Hash keys that are data (Strings, dynamic Symbols) by their bytes, not
  // their shape: an opt-in for local debugging (edge_names.cc, KeyLabel).
  bool string_contents = false;
  // While raw VALUEs are live: the builder (walk) or the graph (naming).
  std::unique_ptr<HeapGraphBuilder> builder;
  HeapGraph graph;
  bool graph_pins = false;
  bool taken = false;
  // take disabled GC (it was enabled before): EnableGcAgain undoes it, once.
  bool gc_disabled_here = false;

  MappedVector<uint32_t> idom;
  MappedVector<uint64_t> retained;

  // Walk state.
  std::vector<std::pair<const char*, VALUE>> roots;
  std::vector<const char*> root_order;  // categories, first appearance first
  std::unordered_map<VALUE, uint32_t> class_ids;
  // How ChildCallback adds the current object's edges: -1 plain, else
  // deferred in that HeapGraphBuilder tier (a thread's or fiber's stacks).
  int child_tier = -1;
  // Whether ChildCallback defers the current object's plain edges to a
  // thread or fiber (anything but a Ractor, thread or fiber holding one).
  bool defer_thread_references = false;
  // Fathom's own: its modules and classes (an instance of one is own too)
  // and its threads, from the Ruby side (Retention.own_objects), and the
  // Array that listed them. Edges to them join the walk last, set apart.
  OwnSet own;
  VALUE own_list = Qnil;
  // Whether the current node is an own instance whose references to the
  // program's objects (Ruby objects and Structs of classes outside Fathom)
  // stay the program's: HeapGraphBuilder::AddProgramEdgeTo.
  bool program_children = false;
  std::vector<uint32_t> focus_nodes;
  bool has_focus = false;
  // Per focus node: the root categories that hold it themselves (e.g.
  // machine_context), computed while the graph still has its edges.
  std::vector<std::vector<uint32_t>> focus_roots;
  VALUE skip_children_of = Qnil;  // the focus array: not a real retainer
  VALUE progress = Qnil;          // an IO for progress lines, or nil

  // A forked walk: names from `prepared_*` instead of Ruby calls, which
  // the child may not make (set in the child only).
  bool forked = false;
  bool names_prepared = false;
  std::vector<PreparedThread> prepared_threads;
  std::vector<std::pair<VALUE, std::string>> prepared_globals;
  VALUE prepared_pins = Qnil;  // an Array holding every prepared VALUE (marked)
  // The parent's side of a forked snapshot: the child's encoded profile.
  bool forked_done = false;
  std::string forked_bytes;
  int64_t fork_ns = 0, child_ns = 0, wait_ns = 0, prepare_ns = 0;

  // Stats.
  int64_t started_ns = 0, time_nanos = 0;
  size_t objects = 0, root_categories = 0;
  int64_t walk_ns = 0, name_ns = 0, analyze_ns = 0, encode_ns = 0;
  size_t peak_bytes = 0;
  size_t dominator_peak_bytes = 0;  // graph not included
  size_t graph_bytes = 0;           // with its edges (freed before encoding)
  size_t edge_count = 0;
  size_t own_edges_dropped = 0;
  // What the profile leaves out (own) and groups (internals).
  size_t own_objects = 0;
  uint64_t own_bytes = 0;
  size_t internal_objects = 0;
  uint64_t internal_bytes = 0;
  size_t internals_extended = 0;  // objects only internals lead to (HeapGraph::ExtendInternals)
  // Whether imemo envs (a block's captured locals) were told apart from
  // the other imemos (ImemoEnvsKnown).
  bool envs_known = false;
  bool progress_shown = false;
  // Set by a walk callback that caught a C++ exception (it may not throw
  // through Ruby's marking code); Walk throws it once out of there. A fixed
  // buffer: recording the failure cannot fail.
  bool walk_failed = false;
  char walk_error[256] = {};
};

// Ends the GC-disabled window of take (only if take opened it). Also
// around anything in the walk that may let another thread run.
inline void EnableGcAgain(Snapshot* s) {
  if (!s->gc_disabled_here) return;
  s->gc_disabled_here = false;
  rb_gc_enable();
}

// ---- retention_walk.cc
// Whether this Ruby exports what the walk needs.
bool HeapWalkAvailable();
// Before the walk, with GC still enabled: fills s->own from own_list (an
// Array of modules, classes and threads, or nil) and notes whether imemo
// envs can be told apart (probed once, at load). Raises TypeError for a
// bad own_list.
void PrepareWalk(Snapshot* s, VALUE own_list);
// Phase 1: fills s->builder (created by the caller). Throws on failure.
void Walk(Snapshot* s);
void InitRetentionWalk();
// Whether obj is the imemo holding another object's instance variables
// (Ruby 4.0's imemo_fields, learned at load; never on 3.x).
bool IsFieldsImemo(VALUE obj);
// A progress line on s->progress once the snapshot has run for a second.
// A failing IO (closed $stderr) only ends the progress lines.
void Progress(Snapshot* s, const char* phase, uint32_t done);

// ---- edge_names.cc
// Phase 2: names the tree edge of every object of s->graph. With
// s->forked it calls no Ruby method (prepared names only; a proc's
// captured locals are then "(captured)" without their names).
void NameEdges(Snapshot* s);
// Before a forked walk, in the parent: fills s->prepared_* (calls the
// original core methods; may raise).
void PrepareNames(Snapshot* s);
// Captures the original core-class methods naming uses (once, at load).
void InitEdgeNames();

// ---- retention_snapshot.cc (shared with the forked walk)
// Phase 1 and the graph: the walk into s->builder, then s->graph (GVL
// held, GC disabled by the caller). Sets walk_ns, objects, own_*.
void BuildGraph(Snapshot* s, VALUE focus);
// Dominators and retained sizes on s->graph: pure computation, no Ruby
// (the caller releases the GVL, or is the forked child).
void AnalyzeGraph(Snapshot* s);
// The encoder's options for s (stamp: the flush's stamp argument). Throws
// TypeError for a bad stamp.
RetentionProfileOptions ProfileOptions(Snapshot* s, VALUE stamp);

// ---- forked_snapshot.cc
// The forked walk (GVL held, GC disabled by the caller, which set up
// everything take does and calls EndTake after). Returns false when fork
// itself failed (errno in *fork_errno): nothing ran, the caller may walk
// in-process. Throws when the child failed, ran past timeout_ns or was
// cancelled (the child is killed and reaped either way).
bool TakeForked(Snapshot* s, const RetentionProfileOptions& options, int64_t timeout_ns, uint64_t memory_bytes,
                int* fork_errno);

}  // namespace retention

}  // namespace fathom
