// Fathom::Native::RetentionSnapshot, the Ruby class: lifecycle (take once,
// then flush (the encoded profile) and stats), the GC glue that pins the graph's objects while
// it holds raw VALUEs, and the analysis run without the GVL. The phases are
// in retention_walk.cc and edge_names.cc (retention_snapshot.h).

#include <ruby.h>

#include <algorithm>
#include <climits>
#include <string>
#include <vector>

#include "base/clock.h"
#include "ruby/io/output_stamp_arg.h"
#include "ruby/runtime/boundary.h"
#include "ruby/fork/fork_child_reset.h"
#include "ruby/retention/stack_scrub.h"
#include "ruby/init.h"
#include "ruby/native_class.h"
#include "retention/dominators.h"
#include "retention/retention_profile.h"
#include "ruby/retention/retention_snapshot.h"

namespace fathom {
namespace retention {
namespace {

// Set while a snapshot walks or waits for its child (GVL held to read or
// change it). Cleared in a process forked meanwhile, where that snapshot
// never ends (fork/fork_child_reset.h).
bool g_snapshot_in_progress = false;
ID id_heap_live_slots, id_heap_available_slots;

// ---------------------------------------------------------------- GC glue

void SnapshotMark(void* ptr) {
  NoThrow("retention snapshot mark", [ptr] {
    Snapshot* s = static_cast<Snapshot*>(ptr);
    if (s->builder) {
      for (uint32_t i = s->builder->first_object_node(); i < s->builder->node_count(); i++)
        rb_gc_mark(static_cast<VALUE>(s->builder->address(i)));
    } else if (s->graph_pins) {
      for (uint32_t i = s->graph.first_object_node(); i < s->graph.node_count(); i++)
        rb_gc_mark(static_cast<VALUE>(s->graph.address(i)));
    }
    rb_gc_mark(s->progress);
    rb_gc_mark(s->skip_children_of);
    rb_gc_mark(s->forked_focus);
    // The walk compares these by address: pinned while it runs.
    rb_gc_mark(s->own_list);
    rb_gc_mark(s->prepared_pins);
    s->own.ForEach([](VALUE v) { rb_gc_mark(v); });
  });
}

void SnapshotFree(void* ptr) {
  NoThrow("retention snapshot free", [ptr] { delete static_cast<Snapshot*>(ptr); });
}

size_t SnapshotSize(const void* ptr) {
  const Snapshot* s = static_cast<const Snapshot*>(ptr);
  return sizeof(*s) + s->graph.MemoryBytes() + s->idom.capacity() * 4 + s->retained.capacity() * 8;
}

const rb_data_type_t kSnapshotType = DataType("Fathom::Native::RetentionSnapshot", SnapshotMark, SnapshotFree, SnapshotSize);

// Raises TypeError (a longjmp) for a wrong receiver: call it before any
// C++ object is alive in the method.
Snapshot* Get(VALUE self) { return Unwrap<Snapshot>(self, kSnapshotType); }

// ---------------------------------------------------------------- phases

// How many objects to reserve room for. GC.stat(:heap_live_slots) has been
// seen to wrap around (~1.8e19 after Ractors ran on 3.1): never trust it
// beyond the slots that exist.
size_t ExpectedObjects() {
  size_t live = rb_gc_stat(ID2SYM(id_heap_live_slots));
  size_t available = rb_gc_stat(ID2SYM(id_heap_available_slots));
  return std::min(live, available);
}

// Dominators and retained sizes: pure computation on the graph, without the GVL.
void Analyze(Snapshot* s) {
  WithoutGvl([s] { AnalyzeGraph(s); });
}

// The dominator path (frame names, root first) of each focus object, or nil.
VALUE FocusPathsValue(const std::vector<FocusReport>& reports) {
  VALUE paths = rb_ary_new_capa(static_cast<long>(reports.size()));
  for (const FocusReport& r : reports) {
    if (!r.found) {
      rb_ary_push(paths, Qnil);
      continue;
    }
    VALUE path = rb_ary_new_capa(static_cast<long>(r.path.size()));
    for (const std::string& name : r.path) rb_ary_push(path, rb_utf8_str_new(name.data(), static_cast<long>(name.size())));
    rb_ary_push(paths, path);
  }
  return paths;
}

VALUE FocusPaths(Snapshot* s) { return FocusPathsValue(FocusReports(s)); }

// Everything from disabling GC on. Runs under Protect: all
// state lives in *s (owned by the Ruby object), so a Ruby exception (an
// interrupt, NoMemoryError) leaves nothing behind but what the caller's
// cleanup resets.
VALUE TakeBody(Snapshot* s, VALUE focus) {
  BuildGraph(s, focus);
  int64_t t1 = MonotonicNs();
  // GC runs again from here on. Naming calls Ruby methods (Thread#keys,
  // Binding#local_variables... through rb_funcall, whose return checks
  // interrupts): at each call the timer may hand the GVL to another thread.
  // With GC still disabled, a puma server's 8 threads allocated for the
  // whole naming phase without collecting (heap pages x2-x9, RSS +16% that
  // stayed). The walk makes no such call (measured: another thread never
  // runs during it), so it alone keeps GC off. Naming needs no frozen
  // heap, only the graph's VALUEs alive and in place: graph_pins makes the
  // mark function mark (and so pin, against GC.compact) every one of them.
  EnableGcAgain(s);
  NameEdges(s);
  s->name_ns = MonotonicNs() - t1;
  // From here on the graph is plain numbers: no VALUE is dereferenced again.
  s->graph_pins = false;
  Analyze(s);
  return FocusPaths(s);
}

}  // namespace

void BuildGraph(Snapshot* s, VALUE focus) {
  s->builder = std::make_unique<HeapGraphBuilder>();
  s->builder->Reserve(ExpectedObjects(), 0);
  int64_t t0 = MonotonicNs();
  Walk(s);
  // Focus objects are looked up while the address table still exists.
  if (!NIL_P(focus)) {
    s->has_focus = true;
    for (long i = 0; i < RARRAY_LEN(focus); i++) {
      VALUE obj = RARRAY_AREF(focus, i);
      s->focus_nodes.push_back(RB_SPECIAL_CONST_P(obj) ? HeapGraphBuilder::kNotFound
                                                       : s->builder->Find(static_cast<uint64_t>(obj)));
    }
  }
  s->peak_bytes = std::max(s->peak_bytes, s->builder->MemoryBytes());
  s->own_edges_dropped = s->builder->dropped_own_edges();
  s->graph = s->builder->Finish();
  for (uint32_t v = s->graph.first_object_node(); v < s->graph.node_count(); v++) {
    if (!s->graph.is_own(v)) continue;
    s->own_objects++;
    s->own_bytes += s->graph.self_size(v);
  }
  s->graph_pins = true;
  s->builder.reset();
  // Which roots hold each focus object themselves: needs the root edges,
  // which Analyze frees. Scans only the roots' edge lists.
  for (uint32_t node : s->focus_nodes)
    s->focus_roots.push_back(node == HeapGraphBuilder::kNotFound ? std::vector<uint32_t>{}
                                                                 : s->graph.RootCategoriesHolding(node));
  s->objects = s->graph.node_count() - s->graph.first_object_node();
  s->root_categories = s->graph.category_count();
  s->walk_ns = MonotonicNs() - t0;
}

std::vector<FocusReport> FocusReports(Snapshot* s) {
  std::vector<FocusReport> reports(s->focus_nodes.size());
  for (size_t i = 0; i < s->focus_nodes.size(); i++) {
    uint32_t node = s->focus_nodes[i];
    FocusReport& r = reports[i];
    if (node == HeapGraphBuilder::kNotFound) continue;
    for (uint32_t c : s->focus_roots[i]) r.roots.push_back(s->graph.name(s->graph.edge_name(c)));
    if (s->idom[node] == kUnreachable) continue;
    r.found = true;
    for (uint32_t d : DominatorPath(s->idom, node)) {  // node first, super-root last
      if (d == HeapGraph::kSuperRoot) continue;
      r.path.push_back(FrameName(s->graph, s->idom, d));
    }
    std::reverse(r.path.begin(), r.path.end());
  }
  return reports;
}

void AnalyzeGraph(Snapshot* s) {
  int64_t t0 = MonotonicNs();
  FATHOM_FAULT_POINT("retention_analyze");
  s->graph_bytes = s->graph.MemoryBytes();
  s->edge_count = s->graph.edge_count();
  // What only Ruby's internals lead to joins them (a literal several
  // iseqs share): before the edges go.
  s->internals_extended = s->graph.ExtendInternals();
  DominatorStats stats;
  s->idom = ComputeDominators(s->graph, &stats);
  s->dominator_peak_bytes = stats.peak_bytes;
  s->retained = RetainedSizes(s->graph, s->idom);
  // Naming is done and frame names follow tree_parent, not the edges:
  // free them before the encoder builds its tables.
  s->graph.ReleaseEdges();
  s->analyze_ns = MonotonicNs() - t0;
}

RetentionProfileOptions ProfileOptions(Snapshot* s, VALUE stamp) {
  RetentionProfileOptions options;
  options.stamp = OutputStampArg(stamp);
  options.max_depth = s->max_depth;
  options.time_nanos = s->time_nanos;
  options.duration_nanos = s->walk_ns + s->name_ns;
  options.comment = "fathom retention profile: stacks are dominator paths from the GC roots";
  // fathom report reads the numbers back (lib/fathom/report/retention.rb).
  options.more_comments.push_back("fathom.retention.own objects=" + std::to_string(s->own_objects) +
                                  " bytes=" + std::to_string(s->own_bytes) +
                                  ": Fathom itself, not charged, not in the totals (its module, classes and "
                                  "their instances, its threads, and what only they hold)");
  options.more_comments.push_back(
      s->envs_known ? "fathom.retention.internals: \"" + options.internals_frame +
                          "\" is one row: imemos (iseqs, method entries, caches, crefs) and iclasses, with what "
                          "only they hold; a block's captured locals stay on the program's paths"
                    : std::string("fathom.retention.internals=off: this Ruby's block environments could not be told "
                                  "apart from its other imemos, so imemos are charged like any object"));
  // Which walk made the profile (docs/internals/retention.md, "Forked snapshots").
  options.more_comments.push_back(
      s->names_prepared
          ? "fathom.retention walk=forked: walked in a forked child, on a copy-on-write image of the heap; the "
            "app paused only for fork()"
          : "fathom.retention walk=in-process: walked in the process, holding the GVL");
  return options;
}

namespace {

// Undoes what take set up, whether it succeeded or not.
void EndTake(Snapshot* s) {
  EnableGcAgain(s);
  s->builder.reset();
  s->graph_pins = false;
  s->skip_children_of = Qnil;
  s->own = OwnSet();
  s->own_list = Qnil;
  g_snapshot_in_progress = false;
}

// ---------------------------------------------------------------- methods

VALUE SnapshotAlloc(VALUE klass) {
  return RubyMethod([klass] {
    Snapshot* s = new Snapshot();
    VALUE self = TypedData_Wrap_Struct(klass, &kSnapshotType, s);
    s->self = self;
    return self;
  });
}

// new(max_depth, string_contents = false): string_contents names String
// hash keys by their bytes instead of their shape (edge_names.cc KeyLabel).
// max_depth as Fathom::Retention validated it (its MAX_DEPTH_RANGE); the
// encoder refuses what it cannot cut (retention_profile.h).
VALUE SnapshotInitialize(int argc, VALUE* argv, VALUE self) {
  Snapshot* s = Get(self);
  return RubyMethod([&] {
    if (argc < 1 || argc > 2) ThrowArgumentError("fathom: wrong number of arguments (given %d, expected 1..2)", argc);
    VALUE max_depth = argv[0];
    VALUE contents = argc > 1 ? argv[1] : Qfalse;
    if (contents != Qtrue && contents != Qfalse) ThrowTypeError("fathom: string_contents must be true or false");
    s->string_contents = contents == Qtrue;
    if (!RB_INTEGER_TYPE_P(max_depth) || !RB_FIXNUM_P(max_depth)) ThrowTypeError("fathom: max_depth must be an Integer");
    long depth = FIX2LONG(max_depth);
    if (depth < 1 || depth > INT_MAX) ThrowArgumentError("fathom: max_depth must be a positive int, got %ld", depth);
    s->max_depth = static_cast<int>(depth);
    return self;
  });
}

// take(gc, progress_io_or_nil, focus_array_or_nil, own = nil) -> Array of
// reference paths (Array of frame names, root first; nil when not found)
// for focus. own: Fathom's modules, classes and threads (an Array, or nil
// for none), whose objects are set apart (retention_snapshot.h).
VALUE SnapshotTake(int argc, VALUE* argv, VALUE self) {
  Snapshot* s = Get(self);
  return RubyMethod([&] {
    if (argc < 3 || argc > 4) ThrowArgumentError("fathom: wrong number of arguments (given %d, expected 3..4)", argc);
    VALUE gc = argv[0], progress = argv[1], focus = argv[2], own = argc > 3 ? argv[3] : Qnil;
    if (!HeapWalkAvailable())
      throw RubyError(rb_eNotImpError,
                      "fathom: this Ruby does not export rb_objspace_reachable_objects_from; "
                      "retention snapshots are unavailable");
    if (s->taken) ThrowFathomError("fathom: this retention snapshot was already taken");
    if (!NIL_P(focus) && !RB_TYPE_P(focus, T_ARRAY)) ThrowTypeError("fathom: focus must be an Array or nil");
    if (g_snapshot_in_progress) ThrowFathomError("fathom: another retention snapshot is in progress in this process");
    PrepareWalk(s, own);  // s->own is marked (pinned) from here on: GC.start may compact
    if (RTEST(gc)) Protect([] { rb_gc_start(); });
    g_snapshot_in_progress = true;
    s->taken = true;
    s->progress = progress;
    s->skip_children_of = focus;
    s->started_ns = MonotonicNs();
    s->time_nanos = RealtimeNs();
    // A GC.disable of the caller's stays in force.
    s->gc_disabled_here = !RTEST(rb_gc_disable());
    // The GC above, and the caller's pick of focus objects, passed the
    // program's objects through stack slots the walk's frames will reuse
    // without writing: zeroed, so that the conservative root (the walk's
    // scan of this C stack) does not find them there
    // (ruby/retention/stack_scrub.h).
    ScrubMachineStackBelow();
    VALUE paths = Qnil;
    try {
      Protect([s, focus, &paths] { paths = TakeBody(s, focus); });
    } catch (...) {
      EndTake(s);
      throw;
    }
    EndTake(s);
    if (s->progress_shown) Progress(s, "done", s->graph.node_count());
    s->progress = Qnil;
    return paths;
  });
}

// take_forked(gc, own, stamp, timeout_seconds, memory_bytes, focus = nil)
// -> true (with focus: the focus objects' paths, as take returns them), or
// false when fork() itself failed (nothing was walked: take in-process
// instead, with a new snapshot). focus: an Array whose objects the child
// follows (the Array itself is no retainer); stats[:focus_roots] then
// says which root categories hold each. The walk, naming, dominators and encoding
// run in a forked child (forked_snapshot.cc); the profile is encoded there
// with `stamp`, so flush returns it whatever stamp it is given. own: as
// take's. memory_bytes: how much the child may map beyond what it
// inherits (0: unbounded). Raises Fathom::Error when the child failed or
// ran past timeout_seconds (it is killed and reaped).
VALUE SnapshotTakeForked(int argc, VALUE* argv, VALUE self) {
  Snapshot* s = Get(self);
  return RubyMethod([&] {
    if (argc < 5 || argc > 6) ThrowArgumentError("fathom: wrong number of arguments (given %d, expected 5..6)", argc);
    VALUE gc = argv[0], own = argv[1], stamp = argv[2], timeout = argv[3], memory = argv[4];
    VALUE focus = argc > 5 ? argv[5] : Qnil;
    if (!NIL_P(focus) && !RB_TYPE_P(focus, T_ARRAY)) ThrowTypeError("fathom: focus must be an Array or nil");
    if (!HeapWalkAvailable())
      throw RubyError(rb_eNotImpError,
                      "fathom: this Ruby does not export rb_objspace_reachable_objects_from; "
                      "retention snapshots are unavailable");
    if (s->taken) ThrowFathomError("fathom: this retention snapshot was already taken");
    if (g_snapshot_in_progress) ThrowFathomError("fathom: another retention snapshot is in progress in this process");
    if (!RB_FLOAT_TYPE_P(timeout) && !RB_INTEGER_TYPE_P(timeout)) ThrowTypeError("fathom: fork_timeout must be a number");
    double timeout_s = NUM2DBL(timeout);
    if (!(timeout_s > 0 && timeout_s <= 86400))
      ThrowArgumentError("fathom: fork_timeout must be between 0 and 86400 seconds, got %g", timeout_s);
    if (!RB_INTEGER_TYPE_P(memory)) ThrowTypeError("fathom: fork_memory must be an Integer");
    uint64_t memory_bytes = NUM2ULL(memory);
    PrepareWalk(s, own);
    if (RTEST(gc)) Protect([] { rb_gc_start(); });
    int64_t t0 = MonotonicNs();
    PrepareNames(s);  // Ruby calls, in the parent: the child may make none
    s->names_prepared = true;
    s->prepare_ns = MonotonicNs() - t0;
    s->started_ns = MonotonicNs();
    s->time_nanos = RealtimeNs();
    RetentionProfileOptions options = ProfileOptions(s, stamp);
    g_snapshot_in_progress = true;
    s->taken = true;
    // The child walks its copy of the Array: no retainer, like take's focus.
    s->forked_focus = focus;
    s->skip_children_of = focus;
    // Disabled here, in the parent: rb_gc_disable finishes a lazy sweep
    // first (frees, runs free functions), which must not happen in the
    // child; the child inherits GC off and never turns it on.
    s->gc_disabled_here = !RTEST(rb_gc_disable());
    // The child walks a copy of this stack: zeroed below here first, as
    // take does (ruby/retention/stack_scrub.h).
    ScrubMachineStackBelow();
    int fork_errno = 0;
    bool done = false;
    try {
      done = TakeForked(s, options, static_cast<int64_t>(timeout_s * 1e9), memory_bytes, &fork_errno);
    } catch (...) {
      EndTake(s);
      s->prepared_pins = Qnil;
      throw;
    }
    EndTake(s);
    s->prepared_pins = Qnil;
    if (!done) return Qfalse;
    return NIL_P(focus) ? Qtrue : FocusPathsValue(s->forked_focus_reports);
  });
}

void RequireTaken(const Snapshot* s) {
  if (!s->taken || (s->idom.empty() && !s->forked_done)) ThrowFathomError("fathom: retention snapshot not taken yet");
}

VALUE SnapshotFlush(VALUE self, VALUE stamp) {
  Snapshot* s = Get(self);
  return RubyMethod([&] {
    RequireTaken(s);
    // Forked: the child encoded it (with the stamp given to take_forked).
    if (s->forked_done) return rb_str_new(s->forked_bytes.data(), static_cast<long>(s->forked_bytes.size()));
    RetentionProfileOptions options = ProfileOptions(s, stamp);
    RetentionProfileStats encode_stats;
    std::string bytes;
    VALUE result = Qnil;
    int64_t t0 = MonotonicNs();
    // Protect: taking the GVL back may run an interrupt that raises.
    Protect([&] {
      WithoutGvl([&] {
        FATHOM_FAULT_POINT("retention_encode");
        bytes = EncodeRetentionProfile(s->graph, s->idom, s->retained, options, &encode_stats);
      });
      result = rb_str_new(bytes.data(), static_cast<long>(bytes.size()));
    });
    s->encode_ns = MonotonicNs() - t0;
    s->internal_objects = encode_stats.internal_objects;
    s->internal_bytes = encode_stats.internal_bytes;
    return result;
  });
}

VALUE SnapshotStats(VALUE self) {
  Snapshot* s = Get(self);
  return RubyMethod([&] {
    RequireTaken(s);
    VALUE h = rb_hash_new();
    auto set = [h](const char* key, long long v) { rb_hash_aset(h, ID2SYM(rb_intern(key)), LL2NUM(v)); };
    const HeapGraph& g = s->graph;
    set("objects", static_cast<long long>(s->objects));
    set("edges", static_cast<long long>(s->edge_count));
    set("root_categories", static_cast<long long>(s->root_categories));
    set("walk_ns", s->walk_ns);
    set("name_ns", s->name_ns);
    // Forked: the app held still for collecting thread names and fork()
    // only; the walk and naming ran in the child.
    set("gvl_held_ns", s->forked_done ? s->prepare_ns + s->fork_ns : s->walk_ns + s->name_ns);
    rb_hash_aset(h, ID2SYM(rb_intern("walk")), ID2SYM(rb_intern(s->forked_done ? "forked" : "in_process")));
    if (s->forked_done) {
      set("fork_ns", s->fork_ns);
      set("child_ns", s->child_ns);
      set("wait_ns", s->wait_ns);
      set("prepare_ns", s->prepare_ns);
    }
    set("analyze_ns", s->analyze_ns);
    set("encode_ns", s->encode_ns);
    set("graph_bytes", static_cast<long long>(s->graph_bytes));
    set("peak_builder_bytes", static_cast<long long>(s->peak_bytes));
    set("dominator_bytes", static_cast<long long>(s->idom.capacity() * 4 + s->retained.capacity() * 8));
    set("dominator_peak_bytes", static_cast<long long>(s->dominator_peak_bytes));
    // Fathom's own objects (not charged) and the Ruby internals' row (known
    // once encoded).
    set("own_objects", static_cast<long long>(s->own_objects));
    set("own_bytes", static_cast<long long>(s->own_bytes));
    set("own_edges_dropped", static_cast<long long>(s->own_edges_dropped));
    set("internal_objects", static_cast<long long>(s->internal_objects));
    set("internal_bytes", static_cast<long long>(s->internal_bytes));
    set("internals_extended", static_cast<long long>(s->internals_extended));
    if (s->forked_done && !NIL_P(s->forked_focus)) {
      VALUE all = rb_ary_new_capa(static_cast<long>(s->forked_focus_reports.size()));
      for (const FocusReport& r : s->forked_focus_reports) {
        VALUE names = rb_ary_new_capa(static_cast<long>(r.roots.size()));
        for (const std::string& name : r.roots) rb_ary_push(names, rb_utf8_str_new(name.data(), static_cast<long>(name.size())));
        rb_ary_push(all, names);
      }
      rb_hash_aset(h, ID2SYM(rb_intern("focus_roots")), all);
    } else if (s->has_focus) {
      // focus_roots: per focus object, the root categories holding it
      // directly (["machine_context"] when a C stack slot points at it),
      // nil when it was not found; the path names it either way.
      VALUE all = rb_ary_new_capa(static_cast<long>(s->focus_nodes.size()));
      for (size_t i = 0; i < s->focus_nodes.size(); i++) {
        if (s->focus_nodes[i] == HeapGraphBuilder::kNotFound) {
          rb_ary_push(all, Qnil);
          continue;
        }
        VALUE names = rb_ary_new();
        for (uint32_t c : s->focus_roots[i]) {
          const std::string& name = g.name(g.edge_name(c));
          rb_ary_push(names, rb_utf8_str_new(name.data(), static_cast<long>(name.size())));
        }
        rb_ary_push(all, names);
      }
      rb_hash_aset(h, ID2SYM(rb_intern("focus_roots")), all);
    }
    return h;
  });
}

}  // namespace
}  // namespace retention

void InitRetentionSnapshot(VALUE mNative) {
  ResetInForkedChild([] { retention::g_snapshot_in_progress = false; });
  retention::InitRetentionWalk();
  retention::InitEdgeNames();
  retention::id_heap_live_slots = rb_intern("heap_live_slots");
  retention::id_heap_available_slots = rb_intern("heap_available_slots");
  // rb_gc_stat builds its key table on first use: do it here, outside any
  // snapshot. TryProtect: a GC without the key must not fail the load
  // (gc_collector.cc, InitGcCollector).
  TryProtect([] { rb_gc_stat(ID2SYM(retention::id_heap_live_slots)); });

  VALUE klass = rb_define_class_under(mNative, "RetentionSnapshot", rb_cObject);
  rb_gc_register_mark_object(klass);
  rb_define_alloc_func(klass, retention::SnapshotAlloc);
  DefineMethods(klass, {{"initialize", Method(retention::SnapshotInitialize)}, {"take", Method(retention::SnapshotTake)},
                        {"take_forked", Method(retention::SnapshotTakeForked)}, {"flush", Method(retention::SnapshotFlush)},
                        {"stats", Method(retention::SnapshotStats)}});
}

}  // namespace fathom
