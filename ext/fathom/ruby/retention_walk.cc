// Phase 1 of a retention snapshot: the breadth-first walk of the object
// graph from Ruby's roots into the core's HeapGraphBuilder (see
// retention_snapshot.h for the phases and the pinning rule).
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>

#include "base/clock.h"
#include "boundary.h"
#include "class_path.h"
#include "retention_snapshot.h"
#include "ruby_private_api.h"

namespace fathom {
namespace retention {
namespace {

constexpr int64_t kProgressAfterNs = 1000000000;  // show progress for snapshots longer than 1 s

ID id_write;
VALUE cWeakMap = Qnil;  // ObjectSpace::WeakMap (and 3.3's WeakKeyMap): weak edges only
VALUE cWeakKeyMap = Qnil;
VALUE cFiber = Qnil;
VALUE cRactor = Qnil;  // holds the list of its live threads

// The order in which deferred holders join the walk (HeapGraphBuilder's
// tiers): first the stacks of threads and fibers, then the references to
// a thread or fiber from anything but its own thread or Ractor (a lock's
// owner, Thread.list), then the conservative machine_context. Everything
// else is walked before all three.
constexpr uint8_t kStackTier = 0;
constexpr uint8_t kThreadReferenceTier = 1;
constexpr uint8_t kConservativeTier = 2;
constexpr int kNotDeferred = -1;

// A weak reference does not keep anything alive, but Ruby reports a weak
// map's entries as its references. Followed, they would make every object
// a WeakMap holds (Fathom's own sampled-liveness map among them) look
// retained by it, and split dominator paths.
bool HoldsOnlyWeakReferences(VALUE obj, int type) {
  if (type != RUBY_T_DATA || RBASIC_CLASS(obj) == 0) return false;
  VALUE klass = rb_obj_class(obj);
  return klass == cWeakMap || (!NIL_P(cWeakKeyMap) && klass == cWeakKeyMap);
}

// A thread or fiber: its references are its stacks (the VM stack's
// locals, temporaries and receivers, precisely; for any thread but the
// one taking the snapshot, and for a suspended fiber, also its C stack,
// conservatively — the public API reports both as plain references) plus
// its thread locals. A hash being iterated is on a stack for the moment;
// what owns it is the constant or ivar that also holds it. So these edges
// are deferred: they name only what no static holder reaches.
bool HoldsStacks(VALUE obj, int type) {
  if (type != RUBY_T_DATA || RBASIC_CLASS(obj) == 0) return false;
  return RTEST(rb_obj_is_kind_of(obj, rb_cThread)) || (!NIL_P(cFiber) && RTEST(rb_obj_is_kind_of(obj, cFiber)));
}

// A Ractor's references include its live threads: the edge that should
// name a thread (and so everything only its stacks hold).
bool IsRactor(VALUE obj, int type) {
  return type == RUBY_T_DATA && RBASIC_CLASS(obj) != 0 && !NIL_P(cRactor) && RTEST(rb_obj_is_kind_of(obj, cRactor));
}

// Whose edges to a thread or fiber are deferred to kThreadReferenceTier
// (see ChildCallback): everything but the thread's own holders, i.e. a
// Ractor (its live threads) and threads and fibers themselves (a thread's
// current and root fiber, a fiber's thread; their edges are in
// kStackTier anyway). Roots are never deferred this way.
bool DefersThreadReferences(VALUE obj, int type) { return !HoldsStacks(obj, type) && !IsRactor(obj, type); }

#if defined(FATHOM_HAVE_HEAP_WALK) && defined(HAVE_RB_OBJ_MEMSIZE_OF)
constexpr bool kHeapWalkAvailable = true;
#else
// Every Ruby since 2.1 exports these; the guard keeps the build honest.
constexpr bool kHeapWalkAvailable = false;
void rb_objspace_reachable_objects_from_root(void (*)(const char*, VALUE, void*), void*) {}
void rb_objspace_reachable_objects_from(VALUE, void (*)(VALUE, void*), void*) {}
size_t rb_obj_memsize_of(VALUE) { return 0; }
#endif

// Records a failure inside a callback Ruby's marking code called: no C++
// exception may unwind through it. Walk throws it once out of there.
void RecordWalkFailure(Snapshot* s, const char* what) noexcept {
  if (s->walk_failed) return;
  s->walk_failed = true;
  snprintf(s->walk_error, sizeof s->walk_error, "%s", what);
}

void RootCallback(const char* category, VALUE obj, void* data) {
  Snapshot* s = static_cast<Snapshot*>(data);
  NoThrow("retention root callback", [&] {
    if (s->walk_failed) return;
    try {
      s->roots.emplace_back(category, obj);
    } catch (const std::exception& e) {
      RecordWalkFailure(s, e.what());
    }
  });
}

// Called from Ruby's C code (gc_mark_children). What AddEdgeTo throws in
// practice is std::length_error past 2^31 - 1 nodes, or bad_alloc: the walk
// then stops adding edges and the snapshot raises Fathom::Error.
void ChildCallback(VALUE child, void* data) {
  Snapshot* s = static_cast<Snapshot*>(data);
  NoThrow("retention child callback", [&] {
    if (s->walk_failed) return;
    try {
      FATHOM_FAULT_POINT("retention_walk");
      if (s->child_tier != kNotDeferred)
        s->builder->AddDeferredEdgeTo(child, static_cast<uint8_t>(s->child_tier));
      else if (s->defer_thread_references && HoldsStacks(child, RB_BUILTIN_TYPE(child)))
        // A lock's owner field (Monitor's owner fiber), Thread.list, a
        // pool's @workers: the thread is reached through its Ractor
        // first, so that what its stacks alone hold is named by that
        // thread, not by some Logger's @mon_data that happens to point at
        // the fiber holding the lock (which was reached before the
        // thread's own stack edges, deferred to kStackTier, were walked).
        s->builder->AddDeferredEdgeTo(child, kThreadReferenceTier);
      else
        s->builder->AddEdgeTo(child);
    } catch (const std::exception& e) {
      RecordWalkFailure(s, e.what());
    }
  });
}

void ThrowIfWalkFailed(const Snapshot* s) {
  if (s->walk_failed) ThrowFathomError("fathom: the retention snapshot failed: %s", s->walk_error);
}

const char* TypeName(int type) {
  switch (type) {
    case RUBY_T_OBJECT: return "Object";
    case RUBY_T_CLASS: return "Class";
    case RUBY_T_MODULE: return "Module";
    case RUBY_T_FLOAT: return "Float";
    case RUBY_T_STRING: return "String";
    case RUBY_T_REGEXP: return "Regexp";
    case RUBY_T_ARRAY: return "Array";
    case RUBY_T_HASH: return "Hash";
    case RUBY_T_STRUCT: return "Struct";
    case RUBY_T_BIGNUM: return "Integer";
    case RUBY_T_FILE: return "File";
    case RUBY_T_DATA: return "Data";
    case RUBY_T_MATCH: return "MatchData";
    case RUBY_T_COMPLEX: return "Complex";
    case RUBY_T_RATIONAL: return "Rational";
    case RUBY_T_SYMBOL: return "Symbol";
    case RUBY_T_IMEMO: return "imemo";
    case RUBY_T_ICLASS: return "iclass";
    default: return "unknown";
  }
}

// The class-name id for obj. Internal objects (imemo: method entries,
// envs, iseqs...; iclass: included modules) and hidden ones (no class)
// are named by their type, e.g. "<imemo>", "<hidden String>".
uint32_t ClassNameId(Snapshot* s, VALUE obj, int type) {
  HeapGraphBuilder& b = *s->builder;
  if (type == RUBY_T_IMEMO || type == RUBY_T_ICLASS || type == RUBY_T_NONE)
    return b.InternName(std::string("<") + TypeName(type) + ">");
  VALUE klass = RBASIC_CLASS(obj);
  if (klass == 0) return b.InternName(std::string("<hidden ") + TypeName(type) + ">");
  VALUE real = rb_obj_class(obj);
  auto it = s->class_ids.find(real);
  if (it != s->class_ids.end()) return it->second;
  // Nothing here allocates a Ruby object: the walk runs with GC disabled,
  // and there an allocation adds a heap page whenever the free list is
  // empty, a page Ruby may keep (rb_class_path made ~450 Strings per
  // snapshot in a small script, more in a Rails app).
  std::string name = ClassPathWithoutAllocating(real);
  uint32_t id = b.InternName(name);
  s->class_ids.emplace(real, id);
  return id;
}

void AddRoots(Snapshot* s) {
  HeapGraphBuilder& b = *s->builder;
  rb_objspace_reachable_objects_from_root(RootCallback, s);
  ThrowIfWalkFailed(s);
  // Categories in first-appearance order, then each one's roots.
  for (auto& r : s->roots) {
    bool seen = false;
    for (const char* c : s->root_order) seen = seen || std::strcmp(c, r.first) == 0;
    if (!seen) s->root_order.push_back(r.first);
  }
  for (const char* c : s->root_order) b.AddRootCategory(c);
  uint32_t category = 1;  // categories are nodes 1..k, in creation order (heap_graph.h)
  for (const char* c : s->root_order) {
    b.BeginEdgesOf(category++);
    // machine_context is the conservative root: words on this thread's C
    // stack that happen to hold an object's address. Any object may sit
    // there for a moment, so its edges join the walk last (after the
    // threads' stacks): a report then names an object by a constant, ivar
    // or global that holds it, and says machine_context only for what
    // nothing else holds.
    bool conservative = std::strcmp(c, "machine_context") == 0;
    for (auto& r : s->roots) {
      if (std::strcmp(r.first, c) != 0) continue;
      if (conservative)
        b.AddDeferredEdgeTo(static_cast<uint64_t>(r.second), kConservativeTier);
      else
        b.AddEdgeTo(static_cast<uint64_t>(r.second));
    }
  }
  std::vector<std::pair<const char*, VALUE>>().swap(s->roots);
}

}  // namespace

bool HeapWalkAvailable() { return kHeapWalkAvailable; }

void Progress(Snapshot* s, const char* phase, uint32_t done) {
  if (NIL_P(s->progress)) return;
  int64_t elapsed = MonotonicNs() - s->started_ns;
  if (elapsed < kProgressAfterNs) return;
  s->progress_shown = true;
  char line[160];
  snprintf(line, sizeof line, "fathom: retention snapshot: %s, %u objects, %.1fs (GVL held)\n", phase, done,
           static_cast<double>(elapsed) / 1e9);
  VALUE io = s->progress;
  // IO#write may release the GVL (and rb_funcall checks interrupts): other
  // threads may run, so not with GC disabled (they would allocate without
  // collecting). A GC here is safe: the builder's VALUEs are marked (pinned)
  // by the snapshot, and no rb_objspace_reachable_objects_from is running.
  bool walking = s->gc_disabled_here;
  EnableGcAgain(s);
  // A closed or failing IO must not fail the snapshot: no more progress then.
  if (!TryProtect([io, &line] { rb_funcall(io, id_write, 1, rb_str_new_cstr(line)); })) s->progress = Qnil;
  if (walking) s->gc_disabled_here = !RTEST(rb_gc_disable());
}

void InitRetentionWalk() {
  id_write = rb_intern("write");
  VALUE object_space = rb_const_get(rb_cObject, rb_intern("ObjectSpace"));
  // Compared by identity during every walk: registered, so that
  // GC.compact can neither free nor move them.
  cWeakMap = rb_const_get(object_space, rb_intern("WeakMap"));
  rb_gc_register_address(&cWeakMap);
  if (rb_const_defined_at(object_space, rb_intern("WeakKeyMap")))  // 3.3+
    cWeakKeyMap = rb_const_get(object_space, rb_intern("WeakKeyMap"));
  rb_gc_register_address(&cWeakKeyMap);
  cFiber = rb_const_get(rb_cObject, rb_intern("Fiber"));
  rb_gc_register_address(&cFiber);
  if (rb_const_defined_at(rb_cObject, rb_intern("Ractor"))) cRactor = rb_const_get(rb_cObject, rb_intern("Ractor"));
  rb_gc_register_address(&cRactor);
}

void Walk(Snapshot* s) {
  AddRoots(s);
  HeapGraphBuilder& b = *s->builder;
  for (uint32_t i = b.first_object_node();; i++) {
    if (i == b.node_count() && !b.DiscoverDeferred()) break;
    VALUE obj = static_cast<VALUE>(b.address(i));
    int type = RB_BUILTIN_TYPE(obj);
    size_t size = rb_obj_memsize_of(obj);
    b.SetNodeInfo(i, ClassNameId(s, obj, type), static_cast<uint8_t>(type), size);
    b.BeginEdgesOf(i);
    // Our own object marks every node (see the mark function); the focus
    // array only exists because the caller asked about its elements; weak
    // maps retain nothing.
    if (obj == s->self || obj == s->skip_children_of || HoldsOnlyWeakReferences(obj, type)) continue;
    s->child_tier = HoldsStacks(obj, type) ? kStackTier : kNotDeferred;
    s->defer_thread_references = DefersThreadReferences(obj, type);
    rb_objspace_reachable_objects_from(obj, ChildCallback, s);
    s->child_tier = kNotDeferred;
    s->defer_thread_references = false;
    ThrowIfWalkFailed(s);
    if ((i & (kProgressEvery - 1)) == 0) Progress(s, "walking", i);
    s->peak_bytes = std::max(s->peak_bytes, b.MemoryBytes());
  }
}

}  // namespace retention
}  // namespace fathom
