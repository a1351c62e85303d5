// Phase 1 of a retention snapshot: the breadth-first walk of the object
// graph from Ruby's roots into the core's HeapGraphBuilder (see
// retention_snapshot.h for the phases and the pinning rule).
#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <cstring>
#include <exception>
#include <string>
#include <vector>

#include "base/clock.h"
#include "ruby/runtime/boundary.h"
#include "ruby/runtime/symbols.h"
#include "ruby/retention/retention_snapshot.h"
#include "ruby/runtime/ruby_private_api.h"
#include "roots/vm_roots.h"

namespace fathom {
namespace retention {
namespace {

constexpr int64_t kProgressAfterNs = 1000000000;  // show progress for snapshots longer than 1 s

ID id_write;
VALUE cWeakMap = Qnil;  // ObjectSpace::WeakMap (and 3.3's WeakKeyMap): weak edges only
VALUE cWeakKeyMap = Qnil;
VALUE g_fiber_class = Qnil;
VALUE cRactor = Qnil;  // holds the list of its live threads

// The order in which deferred holders join the walk (HeapGraphBuilder's
// tiers): first the stacks of threads and fibers, then the references to
// a thread or fiber from anything but its own thread or Ractor (a lock's
// owner, Thread.list), then the conservative machine_context, then the
// Ruby internals a root holds itself (the VM's crefs and iseqs, which
// reach every class: "vm → in vm → via <imemo> → Foo (Class)"). Everything
// else is walked before all four; Fathom's own objects after them.
constexpr uint8_t kStackTier = 0;
constexpr uint8_t kThreadReferenceTier = 1;
constexpr uint8_t kConservativeTier = 2;
constexpr uint8_t kRootInternalsTier = 3;
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
  return RTEST(rb_obj_is_kind_of(obj, rb_cThread)) || (!NIL_P(g_fiber_class) && RTEST(rb_obj_is_kind_of(obj, g_fiber_class)));
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

// ---------------------------------------------------------------- Fathom's own

// Whether obj (of builtin type `type`) is one of Fathom's own objects: the
// list of them, one of its modules or classes, an instance of one, or one
// of its threads (s->own, from Retention.own_objects). Once per edge of
// the walk: an identity check, a read of the class slot and a probe or two
// of a small table. Internal objects (imemo: method entries, iseqs...)
// keep other data in the class slot, so they are never own here: Fathom's
// method entries and iseqs are own through its classes, which hold them.
bool IsOwn(const Snapshot* s, VALUE obj, int type) {
  if (s->own.empty()) return false;
  switch (type) {
    case RUBY_T_IMEMO:
    case RUBY_T_ICLASS:
    case RUBY_T_NONE:
    case RUBY_T_ZOMBIE:
    case RUBY_T_MOVED:
      return false;
    case RUBY_T_CLASS:
    case RUBY_T_MODULE:
      return s->own.Contains(obj);
    default:
      break;
  }
  // The own list, and the focus array: it exists only because a caller
  // asked about its elements (explain_sites' is Fathom's own).
  if (obj == s->own_list || obj == s->skip_children_of) return true;
  VALUE klass = RBASIC_CLASS(obj);
  if (klass == 0) return false;  // hidden
  if (s->own.Contains(klass)) return true;
  if (type == RUBY_T_DATA && s->own.Contains(obj)) return true;  // one of Fathom's threads
  // An object with a singleton class: its class is behind it.
  return RB_FL_TEST_RAW(klass, RUBY_FL_SINGLETON) && s->own.Contains(rb_obj_class(obj));
}

// An instance of one of Fathom's classes whose references to the
// program's Ruby objects stay the program's (the rest of an app's
// middleware chain behind Fathom::Rack::Middleware's @app).
bool IsOwnInstance(const Snapshot* s, VALUE obj, int type) {
  if (type != RUBY_T_OBJECT && type != RUBY_T_DATA && type != RUBY_T_STRUCT) return false;
  return RBASIC_CLASS(obj) != 0 && s->own.Contains(rb_obj_class(obj));
}

// What an own instance holds that is the program's although only Fathom
// leads to it: a Ruby object or a Struct of a class outside Fathom. Core
// containers (Hash, Array, String), procs and threads an own object holds
// are Fathom's buffers, callbacks and helpers.
bool IsProgramObject(const Snapshot* s, VALUE obj, int type) {
  return (type == RUBY_T_OBJECT || type == RUBY_T_STRUCT) && RBASIC_CLASS(obj) != 0 && !IsOwn(s, obj, type);
}

// ---------------------------------------------------------------- Ruby internals

// The one piece of Ruby's internal layout the walk reads (two constants,
// not a struct): an imemo keeps its imemo type in the 4 flag bits above
// RUBY_FL_USHIFT, and imemo_env (a frame's locals once a block or binding
// captured them) is 0 (internal/imemo.h: IMEMO_MASK 0x0f, `enum
// imemo_type`, the same from Ruby 2.3 to 3.4 and master). ProbeImemoEnvs
// checks it on a real proc before anything relies on it.
constexpr VALUE kImemoTypeMask = 0x0f;
constexpr int kImemoEnv = 0;
int ImemoType(VALUE obj) { return static_cast<int>((RBASIC(obj)->flags >> RUBY_FL_USHIFT) & kImemoTypeMask); }
bool ImemoIsEnv(VALUE obj) { return ImemoType(obj) == kImemoEnv; }

// Ruby 4.0 keeps the instance variables of classes and modules, and of
// objects that are not T_OBJECT (Strings, Arrays, Hashes, C data), in a
// companion imemo (imemo_fields: 13 in 4.0.6's internal/imemo.h; a class's
// fields_obj in internal/class.h), and marking the owner yields that imemo,
// not the values. Taken as a Ruby internal it would charge whatever a
// class-level @cache holds to the "Ruby internals" row: it is the
// program's data, like an env. Its type is not hard-coded: ProbeImemoFields
// learns it at load from a class with an instance variable; on Rubies that
// mark ivars directly (3.x) it finds none (-1) and nothing changes.
// docs/internals/versions.md, "Ruby 4.0".
int g_fields_imemo_type = -1;

// Ruby internals: the imemos but envs (iseqs, method entries, call and
// constant caches, crefs, ifuncs, svars...) and iclasses (a module's
// entry in a class's ancestry, with its call-cache table). The profile
// charges them, and what only they keep alive, to one row of their own.
// An env stays the program's: a proc's or binding's captured locals are
// named through it ("(captured) → rows"). Without a working probe nothing
// is an internal (imemos are then charged like any object, as before).
bool IsRubyInternal(const Snapshot* s, VALUE obj, int type) {
  if (!s->envs_known) return false;
  if (type == RUBY_T_ICLASS) return true;
  if (type != RUBY_T_IMEMO) return false;
  int imemo = ImemoType(obj);
  return imemo != kImemoEnv && imemo != g_fields_imemo_type;
}

bool g_envs_known = false;  // ProbeImemoEnvs' verdict, at load

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

// ProbeImemoEnvs' callbacks (Ruby's marking code is below them).
void CollectImemoChild(VALUE child, void* data) {
  NoThrow("retention probe callback", [&] {
    if (RB_BUILTIN_TYPE(child) == RUBY_T_IMEMO) static_cast<std::vector<VALUE>*>(data)->push_back(child);
  });
}
struct ChildFinder {
  VALUE target;
  bool found;
};
void FindChild(VALUE child, void* data) {
  ChildFinder* f = static_cast<ChildFinder*>(data);
  f->found = f->found || child == f->target;
}

// Whether ImemoIsEnv tells envs apart on this Ruby: a proc capturing a
// fresh object references an env holding it and its iseq; exactly the
// imemo children that reference the object must read as envs.
bool ProbeImemoEnvs() {
  if (!kHeapWalkAvailable) return false;
  VALUE pair = Qnil;
  if (!TryProtect([&] { pair = rb_eval_string("fathom_probe = Object.new; [fathom_probe, proc { fathom_probe }]"); }))
    return false;
  if (!RB_TYPE_P(pair, T_ARRAY) || RARRAY_LEN(pair) != 2) return false;
  VALUE local = RARRAY_AREF(pair, 0), proc = RARRAY_AREF(pair, 1);
  std::vector<VALUE> imemos;
  rb_objspace_reachable_objects_from(proc, CollectImemoChild, &imemos);
  int envs = 0;
  bool consistent = true;
  for (VALUE m : imemos) {
    ChildFinder f{local, false};
    rb_objspace_reachable_objects_from(m, FindChild, &f);
    consistent = consistent && f.found == ImemoIsEnv(m);
    envs += f.found;
  }
  RB_GC_GUARD(pair);
  return consistent && envs >= 1;
}

// The imemo type that holds a class's instance variables on this Ruby, or
// -1 where marking a class yields them directly (see g_fields_imemo_type).
int ProbeImemoFields() {
  if (!kHeapWalkAvailable) return -1;
  VALUE pair = Qnil;
  if (!TryProtect([&] {
        pair = rb_eval_string(
          "fathom_probe = Object.new; [fathom_probe, Class.new.tap { |k| k.instance_variable_set(:@p, fathom_probe) }]");
      }))
    return -1;
  if (!RB_TYPE_P(pair, T_ARRAY) || RARRAY_LEN(pair) != 2) return -1;
  VALUE value = RARRAY_AREF(pair, 0), klass = RARRAY_AREF(pair, 1);
  std::vector<VALUE> imemos;
  rb_objspace_reachable_objects_from(klass, CollectImemoChild, &imemos);
  int found = -1;
  for (VALUE m : imemos) {
    ChildFinder f{value, false};
    rb_objspace_reachable_objects_from(m, FindChild, &f);
    if (!f.found) continue;
    int type = ImemoType(m);
    if (type == kImemoEnv || (found != -1 && found != type)) return -1;  // not the layout described above
    found = type;
  }
  RB_GC_GUARD(pair);
  return found;
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
      int type = RB_BUILTIN_TYPE(child);
      if (IsOwn(s, child, type))
        // Fathom's own: walked after everything the program reaches
        // without it, also when a program's thread holds it on its stack.
        s->builder->AddOwnEdgeTo(child);
      else if (s->child_tier != kNotDeferred)
        s->builder->AddDeferredEdgeTo(child, static_cast<uint8_t>(s->child_tier));
      else if (s->defer_thread_references && HoldsStacks(child, type))
        // A lock's owner field (Monitor's owner fiber), Thread.list, a
        // pool's @workers: the thread is reached through its Ractor
        // first, so that what its stacks alone hold is named by that
        // thread, not by some Logger's @mon_data that happens to point at
        // the fiber holding the lock (which was reached before the
        // thread's own stack edges, deferred to kStackTier, were walked).
        s->builder->AddDeferredEdgeTo(child, kThreadReferenceTier);
      else if (s->program_children && IsProgramObject(s, child, type))
        s->builder->AddProgramEdgeTo(child);
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

// What ReshapeVmRoots asks about the roots' objects, answered by Ruby
// (core/roots/vm_roots.h: Ruby 3.4's vm root, in 3.3's shape).
class RubyVmRootsHeap : public roots::VmRootsHeap {
 public:
  explicit RubyVmRootsHeap(Snapshot* s) : s_(s) {}

  // Ruby 3.4's bucket of pinned objects (vm.c pin_array_list_type): a
  // hidden typed T_DATA, told apart by its type's name, which public API
  // gives (RTYPEDDATA_TYPE); ObjectSpace.dump writes the same name.
  bool IsPinnedObjectList(uint64_t ref) override {
    VALUE obj = static_cast<VALUE>(ref);
    if (RB_SPECIAL_CONST_P(obj) || RB_BUILTIN_TYPE(obj) != RUBY_T_DATA || RBASIC_CLASS(obj) != 0) return false;
    if (!RTYPEDDATA_P(obj)) return false;
    const rb_data_type_t* type = RTYPEDDATA_TYPE(obj);
    return type != nullptr && type->wrap_struct_name != nullptr &&
           std::strcmp(type->wrap_struct_name, "VM/pin_array_list") == 0;
  }
  bool IsRactor(uint64_t ref) override {
    VALUE obj = static_cast<VALUE>(ref);
    return !RB_SPECIAL_CONST_P(obj) && retention::IsRactor(obj, RB_BUILTIN_TYPE(obj));
  }
  // What the GC marks from the bucket, as the walk asks for any object.
  void BucketReferences(uint64_t bucket, std::vector<uint64_t>* out) override {
    Collected collected{s_, out};
    rb_objspace_reachable_objects_from(static_cast<VALUE>(bucket), Collect, &collected);
    ThrowIfWalkFailed(s_);
  }

 private:
  struct Collected {
    Snapshot* s;
    std::vector<uint64_t>* out;
  };
  // Called from Ruby's marking code: no C++ exception may leave it.
  static void Collect(VALUE child, void* data) {
    Collected* c = static_cast<Collected*>(data);
    NoThrow("retention root callback", [&] {
      if (c->s->walk_failed) return;
      try {
        c->out->push_back(static_cast<uint64_t>(child));
      } catch (const std::exception& e) {
        RecordWalkFailure(c->s, e.what());
      }
    });
  }

  Snapshot* s_;
};

void AddRoots(Snapshot* s) {
  HeapGraphBuilder& b = *s->builder;
  rb_objspace_reachable_objects_from_root(RootCallback, s);
  ThrowIfWalkFailed(s);
  // Categories in first-appearance order, each with its roots.
  std::vector<roots::RootCategoryRefs> categories;
  for (auto& r : s->roots) {
    auto it = std::find_if(categories.begin(), categories.end(),
                           [&](const roots::RootCategoryRefs& c) { return c.name == r.first; });
    if (it == categories.end()) it = categories.insert(categories.end(), roots::RootCategoryRefs{r.first, {}});
    it->refs.push_back(static_cast<uint64_t>(r.second));
  }
  std::vector<std::pair<const char*, VALUE>>().swap(s->roots);
  // Ruby 3.4 holds the classes C code defined (Object among them) one hop
  // below its vm root, and its registered addresses inside it: given
  // 3.3's shape, a constant reads "vm → Object → Foo::BAR" on every Ruby.
  RubyVmRootsHeap heap(s);
  roots::ReshapeVmRoots(&categories, heap);
  for (const roots::RootCategoryRefs& c : categories) b.AddRootCategory(c.name);
  uint32_t category = 1;  // categories are nodes 1..k, in creation order (heap_graph.h)
  for (const roots::RootCategoryRefs& c : categories) {
    b.BeginEdgesOf(category++);
    // machine_context is the conservative root: words on this thread's C
    // stack that happen to hold an object's address. Any object may sit
    // there for a moment, so its edges join the walk last (after the
    // threads' stacks): a report then names an object by a constant, ivar
    // or global that holds it, and says machine_context only for what
    // nothing else holds.
    bool conservative = c.name == "machine_context";
    for (uint64_t ref : c.refs) {
      VALUE obj = static_cast<VALUE>(ref);
      int type = RB_BUILTIN_TYPE(obj);
      if (IsOwn(s, obj, type))
        b.AddOwnEdgeTo(ref);
      else if (IsRubyInternal(s, obj, type))
        b.AddDeferredEdgeTo(ref, kRootInternalsTier);
      else if (conservative)
        b.AddDeferredEdgeTo(ref, kConservativeTier);
      else
        b.AddEdgeTo(ref);
    }
  }
}

}  // namespace

bool IsFieldsImemo(VALUE obj) {
  return g_fields_imemo_type != -1 && RB_BUILTIN_TYPE(obj) == RUBY_T_IMEMO && ImemoType(obj) == g_fields_imemo_type;
}

bool HeapWalkAvailable() { return kHeapWalkAvailable; }

void OwnSet::Insert(VALUE v) {
  if ((size_ + 1) * 2 > slots_.size()) {
    std::vector<VALUE> old;
    old.swap(slots_);
    slots_.assign(std::max<size_t>(16, old.size() * 2), 0);
    size_ = 0;
    for (VALUE o : old)
      if (o != 0) Insert(o);
  }
  size_t mask = slots_.size() - 1;
  size_t i = Slot(v) & mask;
  for (; slots_[i] != 0; i = (i + 1) & mask)
    if (slots_[i] == v) return;
  slots_[i] = v;
  size_++;
}

void PrepareWalk(Snapshot* s, VALUE own_list) {
  s->envs_known = g_envs_known;
  if (NIL_P(own_list)) return;
  if (!RB_TYPE_P(own_list, T_ARRAY)) ThrowTypeError("fathom: own must be an Array of modules and threads, or nil");
  for (long i = 0; i < RARRAY_LEN(own_list); i++) {
    VALUE v = RARRAY_AREF(own_list, i);
    bool module = RB_TYPE_P(v, T_CLASS) || RB_TYPE_P(v, T_MODULE);
    if (!module && !RTEST(rb_obj_is_kind_of(v, rb_cThread)))
      ThrowTypeError("fathom: own must be an Array of modules and threads, got an element of class %s",
                     rb_obj_classname(v));
  }
  s->own_list = own_list;
  for (long i = 0; i < RARRAY_LEN(own_list); i++) s->own.Insert(RARRAY_AREF(own_list, i));
}

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
  g_fiber_class = rb_const_get(rb_cObject, rb_intern("Fiber"));
  rb_gc_register_address(&g_fiber_class);
  if (rb_const_defined_at(rb_cObject, rb_intern("Ractor"))) cRactor = rb_const_get(rb_cObject, rb_intern("Ractor"));
  rb_gc_register_address(&cRactor);
  // At load, so that the probe's few objects are long gone (not left in a
  // C stack slot) by the first snapshot.
  g_envs_known = ProbeImemoEnvs();
  g_fields_imemo_type = g_envs_known ? ProbeImemoFields() : -1;
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
    if (IsRubyInternal(s, obj, type)) b.MarkInternal(i);
    b.BeginEdgesOf(i);
    // Our own object marks every node (see the mark function); the focus
    // array only exists because the caller asked about its elements, the
    // own list to say what is Fathom's; weak maps retain nothing.
    if (obj == s->self || obj == s->skip_children_of || obj == s->own_list || HoldsOnlyWeakReferences(obj, type))
      continue;
    s->child_tier = HoldsStacks(obj, type) ? kStackTier : kNotDeferred;
    s->defer_thread_references = DefersThreadReferences(obj, type);
    s->program_children = b.is_own(i) && IsOwnInstance(s, obj, type);
    rb_objspace_reachable_objects_from(obj, ChildCallback, s);
    s->child_tier = kNotDeferred;
    s->defer_thread_references = false;
    s->program_children = false;
    ThrowIfWalkFailed(s);
    if ((i & (kProgressEvery - 1)) == 0) Progress(s, "walking", i);
    s->peak_bytes = std::max(s->peak_bytes, b.MemoryBytes());
  }
}

}  // namespace retention
}  // namespace fathom
