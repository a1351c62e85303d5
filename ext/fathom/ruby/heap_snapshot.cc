// Fathom::Native::HeapSnapshot — the object graph of the running process,
// for "why is this still alive" (retention) analysis.
//
// Phases of HeapSnapshot#take (details in IMPLEMENTATION.md, "Retention"):
//
//  1. Walk (GVL held throughout, GC disabled). Roots come from
//     rb_objspace_reachable_objects_from_root with Ruby's own category names
//     ("vm", "machine_context", "global_tbl", ...); each object's children
//     from rb_objspace_reachable_objects_from, breadth-first, into the core's
//     HeapGraphBuilder (compact arrays, no Ruby objects). Both functions are
//     exported by libruby but declared in no installed header: our own
//     prototypes in ruby_private_api.h, behind have_func.
//  2. Naming (GVL). Only the edge that discovered each object (its BFS
//     tree edge, on a shortest path from the roots) needs a name, since
//     those are the edges the reports print. For each referrer, its named
//     slots are listed once through public API (ivars, constants, array
//     slots, hash entries, struct members, a proc's captured locals, thread
//     locals, globals) and matched against its tree children by identity.
//  3. Dominators, retained sizes and pprof encoding: pure computation on
//     the core graph, run without the GVL.
//
// Safety. During phases 1-2 the graph holds raw VALUEs that nothing else
// keeps alive or in place. GC is disabled, but GC.start and GC.compact run
// even then, and naming calls Ruby methods (Proc#binding, ...) at whose
// interrupt checks another thread could call them. So while the graph holds
// raw VALUEs, this object's mark function marks (and so pins) every one
// of them. rb_objspace_reachable_objects_from must never be called during
// GC; it is only called from here, with the GVL, outside GC.
#include "heap_snapshot.h"

#include <ruby/debug.h>
#include <ruby/thread.h>
#include <time.h>

#include <cstring>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/clock.h"
#include "retention/dominators.h"
#include "retention/heap_graph.h"
#include "retention/retention_profile.h"
#include "ruby_private_api.h"

namespace fathom {
namespace {

VALUE eFathomError = Qnil;
ID id_binding, id_local_variables, id_local_variable_get, id_keys, id_thread_variables,
    id_thread_variable_get, id_global_variables, id_write, id_members;
VALUE cThread = Qnil, cBinding = Qnil;
bool g_snapshot_in_progress = false;

// Hashes with more entries than this name their values "$hashval": one
// frame per key would split a big cache into thousands of slivers.
constexpr long kMaxNamedHashEntries = 32;
constexpr long kNamedArraySlots = 10;
constexpr size_t kMaxKeyLength = 40;
constexpr uint32_t kProgressEvery = 1 << 16;
constexpr int64_t kProgressAfterNs = 1000000000;  // show progress for snapshots longer than 1 s

struct Snapshot {
  VALUE self = Qnil;
  int max_depth = 64;
  // While raw VALUEs are live: the builder (walk) or the graph (naming).
  std::unique_ptr<HeapGraphBuilder> builder;
  HeapGraph graph;
  bool graph_pins = false;
  bool taken = false;

  std::vector<uint32_t> idom;
  std::vector<uint64_t> retained;

  // Walk state.
  std::vector<std::pair<const char*, VALUE>> roots;
  std::unordered_map<VALUE, uint32_t> class_ids;
  VALUE skip_children_of = Qnil;  // the focus array: not a real retainer
  VALUE progress = Qnil;          // an IO for progress lines, or nil

  // Stats.
  int64_t started_ns = 0, time_nanos = 0;
  int64_t walk_ns = 0, name_ns = 0, analyze_ns = 0, encode_ns = 0;
  size_t peak_bytes = 0;
  size_t dominator_peak_bytes = 0;  // graph not included
  size_t graph_bytes = 0;           // with its edges (freed before encoding)
  size_t edge_count = 0;
  bool progress_shown = false;
  std::string error;  // from the work done without the GVL
};

// ---------------------------------------------------------------- GC glue

void SnapshotMark(void* ptr) {
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
}

void SnapshotFree(void* ptr) { delete static_cast<Snapshot*>(ptr); }

size_t SnapshotSize(const void* ptr) {
  const Snapshot* s = static_cast<const Snapshot*>(ptr);
  return sizeof(*s) + s->graph.MemoryBytes() + s->idom.capacity() * 4 + s->retained.capacity() * 8;
}

const rb_data_type_t kSnapshotType = {
    "Fathom::Native::HeapSnapshot",
    {SnapshotMark, SnapshotFree, SnapshotSize, nullptr, {nullptr}},
    nullptr,
    nullptr,
    RUBY_TYPED_FREE_IMMEDIATELY,
};

Snapshot* Get(VALUE self) { return static_cast<Snapshot*>(rb_check_typeddata(self, &kSnapshotType)); }

// ---------------------------------------------------------------- walk

void Progress(Snapshot* s, const char* phase, uint32_t done) {
  if (NIL_P(s->progress)) return;
  int64_t elapsed = MonotonicNs() - s->started_ns;
  if (elapsed < kProgressAfterNs) return;
  s->progress_shown = true;
  char line[160];
  snprintf(line, sizeof line, "fathom: retention snapshot: %s, %u objects, %.1fs (GVL held)\n", phase, done,
           static_cast<double>(elapsed) / 1e9);
  rb_funcall(s->progress, id_write, 1, rb_str_new_cstr(line));
}

void RootCallback(const char* category, VALUE obj, void* data) {
  static_cast<Snapshot*>(data)->roots.emplace_back(category, obj);
}

// Called from Ruby's C code (gc_mark_children): a C++ exception must not
// unwind through it. The only one AddEdgeTo throws in practice is
// std::length_error past 2^31 - 1 nodes (or bad_alloc): the walk then stops
// adding edges and TakeBody raises.
void ChildCallback(VALUE child, void* data) {
  Snapshot* s = static_cast<Snapshot*>(data);
  if (!s->error.empty()) return;
  try {
    s->builder->AddEdgeTo(child);
  } catch (const std::exception& e) {
    s->error = e.what();
  }
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
  VALUE path = rb_class_path(real);
  uint32_t id = b.InternName(std::string(RSTRING_PTR(path), static_cast<size_t>(RSTRING_LEN(path))));
  s->class_ids.emplace(real, id);
  return id;
}

#if defined(FATHOM_HAVE_HEAP_WALK) && defined(HAVE_RB_OBJ_MEMSIZE_OF)
constexpr bool kHeapWalkAvailable = true;
#else
// Every Ruby since 2.1 exports these; the guard keeps the build honest.
constexpr bool kHeapWalkAvailable = false;
void rb_objspace_reachable_objects_from_root(void (*)(const char*, VALUE, void*), void*) {}
void rb_objspace_reachable_objects_from(VALUE, void (*)(VALUE, void*), void*) {}
size_t rb_obj_memsize_of(VALUE) { return 0; }
#endif

void Walk(Snapshot* s) {
  HeapGraphBuilder& b = *s->builder;
  rb_objspace_reachable_objects_from_root(RootCallback, s);
  // Categories in first-appearance order, then each one's roots.
  std::vector<const char*> order;
  for (auto& r : s->roots) {
    bool seen = false;
    for (const char* c : order) seen = seen || std::strcmp(c, r.first) == 0;
    if (!seen) order.push_back(r.first);
  }
  std::vector<uint32_t> category_nodes;
  for (const char* c : order) category_nodes.push_back(b.AddRootCategory(c));
  for (size_t k = 0; k < order.size(); k++) {
    b.BeginEdgesOf(category_nodes[k]);
    // machine_context is the conservative root: words on a thread's C
    // stack that happen to hold an object's address. Any object may sit
    // there for a moment, so its edges are followed only once everything
    // precisely rooted is walked: a report then names an object by a
    // constant, ivar or global that holds it, and says machine_context
    // only for what nothing else holds.
    bool conservative = std::strcmp(order[k], "machine_context") == 0;
    for (auto& r : s->roots) {
      if (std::strcmp(r.first, order[k]) != 0) continue;
      if (conservative)
        b.AddDeferredEdgeTo(static_cast<uint64_t>(r.second));
      else
        b.AddEdgeTo(static_cast<uint64_t>(r.second));
    }
  }
  s->roots.clear();
  s->roots.shrink_to_fit();

  for (uint32_t i = b.first_object_node();; i++) {
    if (i == b.node_count() && !b.DiscoverDeferred()) break;
    VALUE obj = static_cast<VALUE>(b.address(i));
    int type = RB_BUILTIN_TYPE(obj);
    size_t size = rb_obj_memsize_of(obj);
    b.SetNodeInfo(i, ClassNameId(s, obj, type), static_cast<uint8_t>(type), size);
    b.BeginEdgesOf(i);
    // Our own object marks every node (see SnapshotMark); the focus array
    // only exists because the caller asked about its elements.
    if (obj == s->self || obj == s->skip_children_of) continue;
    rb_objspace_reachable_objects_from(obj, ChildCallback, s);
    if (!s->error.empty()) break;  // TakeBody raises, once Walk's locals are gone
    if ((i & (kProgressEvery - 1)) == 0) Progress(s, "walking", i);
    s->peak_bytes = std::max(s->peak_bytes, b.MemoryBytes());
  }
}

// ---------------------------------------------------------------- naming

// The unnamed tree children of one referrer, by address.
class ChildIndex {
 public:
  void Reset(const HeapGraph& g, uint32_t parent) {
    items_.clear();
    g.ForEachTreeChild(parent, [&](uint32_t, uint32_t child) {
      if (g.edge_name(child) == 0) items_.emplace_back(static_cast<VALUE>(g.address(child)), child);
    });
    // Not clear(): it walks every bucket, and after a 200k-entry hash that
    // would cost 200k steps for every later referrer.
    if (!map_.empty()) std::unordered_map<VALUE, uint32_t>().swap(map_);
    if (items_.size() > 16)
      for (auto& it : items_) map_.emplace(it.first, it.second);
  }
  bool empty() const { return items_.empty(); }
  // The child at obj that is still unnamed, else UINT32_MAX.
  uint32_t Find(VALUE obj) const {
    if (!map_.empty()) {
      auto it = map_.find(obj);
      return it == map_.end() ? UINT32_MAX : it->second;
    }
    for (auto& it : items_)
      if (it.first == obj) return it.second;
    return UINT32_MAX;
  }
  const std::vector<std::pair<VALUE, uint32_t>>& items() const { return items_; }

 private:
  std::vector<std::pair<VALUE, uint32_t>> items_;
  std::unordered_map<VALUE, uint32_t> map_;
};

struct Namer {
  HeapGraph& g;
  ChildIndex children;
  // Names of a proc's (or binding's) captured locals, by value, waiting for
  // the env objects they live in to be named.
  std::unordered_map<uint32_t, std::vector<std::pair<VALUE, std::string>>> env_locals;  // env node -> locals
  std::vector<std::pair<VALUE, std::string>> globals;  // value -> "$name"

  void Name(VALUE obj, const std::string& name) {
    uint32_t child = children.Find(obj);
    if (child != UINT32_MAX && g.edge_name(child) == 0) g.SetEdgeName(child, name);
  }
};

std::string IdName(ID id) {
  VALUE str = rb_id2str(id);
  return NIL_P(str) ? std::string() : std::string(RSTRING_PTR(str), static_cast<size_t>(RSTRING_LEN(str)));
}

std::string StrOf(VALUE str) { return std::string(RSTRING_PTR(str), static_cast<size_t>(RSTRING_LEN(str))); }

int IvarCallback(ID key, VALUE val, st_data_t arg) {
  Namer* n = reinterpret_cast<Namer*>(arg);
  if (RB_SPECIAL_CONST_P(val)) return ST_CONTINUE;
  std::string name = IdName(key);
  // Internal ivars (no "@": __classpath__, __attached__...) keep the fallback name.
  if (!name.empty() && name[0] == '@') n->Name(val, name);
  return ST_CONTINUE;
}

bool Printable(const std::string& s) {
  if (s.empty() || s.size() > kMaxKeyLength) return false;
  for (unsigned char c : s)
    if (c < 0x20 || c == 0x7f) return false;
  return true;
}

// "{:name}", "{\"key\"}", "{42}", or "" when the key is not small and printable.
// Only built-in key types, formatted here: no user #inspect runs.
std::string KeyLabel(VALUE key) {
  if (RB_FIXNUM_P(key)) return "{" + std::to_string(FIX2LONG(key)) + "}";
  if (RB_SYMBOL_P(key)) {
    std::string name = StrOf(rb_sym2str(key));
    return Printable(name) ? "{:" + name + "}" : "";
  }
  if (RB_TYPE_P(key, T_STRING) && rb_obj_class(key) == rb_cString) {
    std::string text = StrOf(key);
    return Printable(text) && text.find('"') == std::string::npos ? "{\"" + text + "\"}" : "";
  }
  if (key == Qtrue) return "{true}";
  if (key == Qfalse) return "{false}";
  if (NIL_P(key)) return "{nil}";
  return "";
}

struct HashNaming {
  Namer* n;
  bool named_keys;
};

int HashCallback(VALUE key, VALUE val, VALUE arg) {
  auto* h = reinterpret_cast<HashNaming*>(arg);
  if (!RB_SPECIAL_CONST_P(val)) {
    std::string label = h->named_keys ? KeyLabel(key) : "";
    h->n->Name(val, label.empty() ? "$hashval" : label);
  }
  if (!RB_SPECIAL_CONST_P(key)) h->n->Name(key, "$hashkey");
  return ST_CONTINUE;
}

// Ruby calls that may raise (a C-implemented proc has no binding...) run
// under rb_protect; a failure just leaves the names to the fallback.
struct Call {
  VALUE recv;
  ID mid;
  int argc;
  VALUE arg;
};

VALUE DoCall(VALUE p) {
  Call* c = reinterpret_cast<Call*>(p);
  return c->argc == 0 ? rb_funcall(c->recv, c->mid, 0) : rb_funcall(c->recv, c->mid, 1, c->arg);
}

bool SafeCall(VALUE recv, ID mid, VALUE* out, VALUE arg = Qundef) {
  Call c{recv, mid, arg == Qundef ? 0 : 1, arg};
  int state = 0;
  *out = rb_protect(DoCall, reinterpret_cast<VALUE>(&c), &state);
  if (state) {
    rb_set_errinfo(Qnil);
    return false;
  }
  return true;
}

struct ConstGet {
  VALUE mod;
  ID id;
};

VALUE DoConstGet(VALUE p) {
  ConstGet* c = reinterpret_cast<ConstGet*>(p);
  return rb_const_get_at(c->mod, c->id);
}

// rb_const_get_at, not Module#const_get: no user-defined method can run.
bool SafeConstGet(VALUE mod, ID id, VALUE* out) {
  ConstGet c{mod, id};
  int state = 0;
  *out = rb_protect(DoConstGet, reinterpret_cast<VALUE>(&c), &state);
  if (state) {
    rb_set_errinfo(Qnil);
    return false;
  }
  return true;
}

std::string ClassPath(VALUE mod) {
  VALUE path = rb_class_path_cached(mod);
  return NIL_P(path) ? "" : StrOf(path);
}

void NameConstants(Namer& n, VALUE mod) {
  std::string prefix = mod == rb_cObject ? "" : ClassPath(mod);
  if (mod != rb_cObject && prefix.empty()) prefix = "(anonymous)";
  VALUE list = rb_const_list(rb_mod_const_at(mod, nullptr));
  for (long i = 0; i < RARRAY_LEN(list); i++) {
    VALUE sym = RARRAY_AREF(list, i);
    ID id = SYM2ID(sym);
    // Never trigger an autoload from a profiler.
    if (!NIL_P(rb_autoload_p(mod, id))) continue;
    VALUE val;
    if (!SafeConstGet(mod, id, &val) || RB_SPECIAL_CONST_P(val)) continue;
    std::string name = IdName(id);
    n.Name(val, prefix.empty() ? name : prefix + "::" + name);
  }
}

// A binding's locals by value, for the env objects a proc or binding holds.
void CollectLocals(Namer& n, VALUE binding) {
  VALUE names;
  if (!SafeCall(binding, id_local_variables, &names) || !RB_TYPE_P(names, T_ARRAY)) return;
  std::vector<std::pair<VALUE, std::string>> locals;
  for (long i = 0; i < RARRAY_LEN(names); i++) {
    VALUE sym = RARRAY_AREF(names, i), val;
    if (!SafeCall(binding, id_local_variable_get, &val, sym) || RB_SPECIAL_CONST_P(val)) continue;
    locals.emplace_back(val, IdName(SYM2ID(sym)));
  }
  if (locals.empty()) return;
  // The env objects are the proc's internal (imemo) children.
  for (auto& item : n.children.items()) {
    if (RB_BUILTIN_TYPE(item.first) != RUBY_T_IMEMO) continue;
    n.g.SetEdgeName(item.second, "(captured)");
    n.env_locals[item.second] = locals;
  }
}

void NameThread(Namer& n, VALUE thread) {
  VALUE keys;
  if (SafeCall(thread, id_keys, &keys) && RB_TYPE_P(keys, T_ARRAY)) {
    for (long i = 0; i < RARRAY_LEN(keys); i++) {
      VALUE key = RARRAY_AREF(keys, i);
      if (!RB_SYMBOL_P(key)) continue;
      VALUE val = rb_thread_local_aref(thread, SYM2ID(key));
      if (!RB_SPECIAL_CONST_P(val)) n.Name(val, "thread[:" + StrOf(rb_sym2str(key)) + "]");
    }
  }
  VALUE vars;
  if (SafeCall(thread, id_thread_variables, &vars) && RB_TYPE_P(vars, T_ARRAY)) {
    for (long i = 0; i < RARRAY_LEN(vars); i++) {
      VALUE key = RARRAY_AREF(vars, i), val;
      if (!SafeCall(thread, id_thread_variable_get, &val, key) || RB_SPECIAL_CONST_P(val)) continue;
      if (RB_SYMBOL_P(key)) n.Name(val, "thread_variable[:" + StrOf(rb_sym2str(key)) + "]");
    }
  }
}

void CollectGlobals(Namer& n) {
  VALUE names;
  if (!SafeCall(rb_mKernel, id_global_variables, &names) || !RB_TYPE_P(names, T_ARRAY)) return;
  for (long i = 0; i < RARRAY_LEN(names); i++) {
    std::string name = StrOf(rb_sym2str(RARRAY_AREF(names, i)));
    // Plain names only: punctuation globals ($~, $_, $!...) are frame- or
    // thread-local or computed, and $FILENAME's getter reads ARGF (may open a file).
    bool plain = name.size() > 1 && (isalpha(static_cast<unsigned char>(name[1])) || name[1] == '_');
    for (size_t k = 2; plain && k < name.size(); k++)
      plain = isalnum(static_cast<unsigned char>(name[k])) || name[k] == '_';
    if (!plain || name == "$FILENAME") continue;
    VALUE val = rb_gv_get(name.c_str());
    if (!RB_SPECIAL_CONST_P(val)) n.globals.emplace_back(val, name);
  }
}

// A named class or module is known by its path wherever it is referenced
// from (the VM's class table, a superclass link, a method's cref...).
void NameModules(Namer& n) {
  for (auto& item : n.children.items()) {
    VALUE v = item.first;
    if (n.g.edge_name(item.second) != 0 || RBASIC_CLASS(v) == 0) continue;
    int type = RB_BUILTIN_TYPE(v);
    if (type != RUBY_T_CLASS && type != RUBY_T_MODULE) continue;
    if (RB_FL_TEST(v, RUBY_FL_SINGLETON)) continue;
    std::string path = ClassPath(v);
    if (!path.empty()) n.g.SetEdgeName(item.second, path);
  }
}

void NameChildrenOf(Namer& n, uint32_t parent) {
  HeapGraph& g = n.g;
  if (g.is_category(parent)) {
    if (g.name(g.edge_name(parent)) == "global_tbl")
      for (auto& gv : n.globals) n.Name(gv.first, gv.second);
    NameModules(n);
    // What else a root category holds has no name of its own.
    std::string via = "in " + g.name(g.edge_name(parent));
    for (auto& item : n.children.items())
      if (g.edge_name(item.second) == 0) g.SetEdgeName(item.second, via);
    return;
  }
  VALUE obj = static_cast<VALUE>(g.address(parent));
  int type = g.type(parent);
  auto env = n.env_locals.find(parent);
  if (env != n.env_locals.end()) {
    for (auto& local : env->second) n.Name(local.first, local.second);
    n.env_locals.erase(env);
  }
  switch (type) {
    case RUBY_T_IMEMO:
    case RUBY_T_ICLASS:
      break;  // internal: no public API to look inside; the fallback names them
    case RUBY_T_ARRAY: {
      long len = RARRAY_LEN(obj);
      for (long i = 0; i < len; i++) {
        VALUE v = RARRAY_AREF(obj, i);
        if (!RB_SPECIAL_CONST_P(v)) n.Name(v, i < kNamedArraySlots ? "[" + std::to_string(i) + "]" : "[10+]");
      }
      break;
    }
    case RUBY_T_HASH: {
      HashNaming h{&n, RHASH_SIZE(obj) <= static_cast<size_t>(kMaxNamedHashEntries)};
      rb_hash_foreach(obj, HashCallback, reinterpret_cast<VALUE>(&h));
      break;
    }
    case RUBY_T_STRUCT: {
      VALUE members;
      if (SafeCall(obj, id_members, &members) && RB_TYPE_P(members, T_ARRAY)) {
        for (long i = 0; i < RARRAY_LEN(members); i++) {
          VALUE v = rb_struct_aref(obj, LONG2NUM(i));
          if (!RB_SPECIAL_CONST_P(v)) n.Name(v, "." + StrOf(rb_sym2str(RARRAY_AREF(members, i))));
        }
      }
      break;
    }
    case RUBY_T_CLASS:
    case RUBY_T_MODULE:
      if (RBASIC_CLASS(obj) != 0) NameConstants(n, obj);
      break;
    case RUBY_T_DATA:
      if (RBASIC_CLASS(obj) == 0) break;
      if (rb_obj_is_proc(obj)) {
        VALUE binding;
        if (SafeCall(obj, id_binding, &binding)) CollectLocals(n, binding);
      } else if (rb_obj_is_kind_of(obj, cBinding)) {
        CollectLocals(n, obj);
      } else if (rb_obj_is_kind_of(obj, cThread)) {
        NameThread(n, obj);
      }
      break;
    default:
      break;
  }
  bool internal = type == RUBY_T_IMEMO || type == RUBY_T_ICLASS;
  if (!internal && (RBASIC_CLASS(obj) != 0 || type == RUBY_T_CLASS || type == RUBY_T_MODULE))
    rb_ivar_foreach(obj, IvarCallback, reinterpret_cast<st_data_t>(&n));
  NameModules(n);
  // Whatever is left is named after the referrer's class.
  const std::string& cls = g.name(g.class_name(parent));
  std::string via = "via " + cls;
  for (auto& item : n.children.items())
    if (g.edge_name(item.second) == 0) g.SetEdgeName(item.second, via);
}

void NameEdges(Snapshot* s) {
  Namer n{s->graph, {}, {}, {}};
  CollectGlobals(n);
  HeapGraph& g = s->graph;
  for (uint32_t p = 1; p < g.node_count(); p++) {
    n.children.Reset(g, p);
    if (n.children.empty()) continue;
    NameChildrenOf(n, p);
    if ((p & (kProgressEvery - 1)) == 0) Progress(s, "naming references", p);
  }
}

// ---------------------------------------------------------------- analysis (no GVL)

// Core errors (std::bad_alloc, a violated invariant) must not unwind
// through Ruby's frames: they are caught here and raised as Fathom::Error
// once the GVL is back.
void* AnalyzeWithoutGvl(void* arg) {
  Snapshot* s = static_cast<Snapshot*>(arg);
  int64_t t0 = MonotonicNs();
  try {
    s->graph_bytes = s->graph.MemoryBytes();
    s->edge_count = s->graph.edge_count();
    DominatorStats stats;
    s->idom = ComputeDominators(s->graph, &stats);
    s->dominator_peak_bytes = stats.peak_bytes;
    s->retained = RetainedSizes(s->graph, s->idom);
    // Naming is done and frame names follow tree_parent, not the edges:
    // free them before the encoder builds its tables.
    s->graph.ReleaseEdges();
  } catch (const std::exception& e) {
    s->error = e.what();
  }
  s->analyze_ns = MonotonicNs() - t0;
  return nullptr;
}

// ---------------------------------------------------------------- Ruby methods

VALUE SnapshotAlloc(VALUE klass) {
  Snapshot* s = new Snapshot();
  VALUE self = TypedData_Wrap_Struct(klass, &kSnapshotType, s);
  s->self = self;
  return self;
}

VALUE SnapshotInitialize(VALUE self, VALUE max_depth) {
  Snapshot* s = Get(self);
  int depth = NUM2INT(max_depth);
  if (depth < 2 || depth > 4096) rb_raise(rb_eArgError, "fathom: max_depth must be between 2 and 4096, got %d", depth);
  s->max_depth = depth;
  return self;
}

struct TakeArgs {
  Snapshot* s;
  VALUE focus;
  VALUE paths;
};

// The part that can raise (an interrupt in a Ruby call, NoMemoryError):
// run under rb_protect so that GC is re-enabled and the pins dropped.
VALUE TakeBody(VALUE arg) {
  TakeArgs* a = reinterpret_cast<TakeArgs*>(arg);
  Snapshot* s = a->s;
  s->builder = std::make_unique<HeapGraphBuilder>();
  s->builder->Reserve(static_cast<size_t>(rb_gc_stat(ID2SYM(rb_intern("heap_live_slots")))), 0);
  int64_t t0 = MonotonicNs();
  try {
    Walk(s);
  } catch (const std::exception& e) {
    s->error = e.what();
  }
  if (!s->error.empty()) rb_raise(eFathomError, "fathom: the heap snapshot failed: %s", s->error.c_str());
  // Focus objects are looked up while the address table still exists.
  std::vector<uint32_t> focus_nodes;
  if (!NIL_P(a->focus)) {
    for (long i = 0; i < RARRAY_LEN(a->focus); i++) {
      VALUE obj = RARRAY_AREF(a->focus, i);
      focus_nodes.push_back(RB_SPECIAL_CONST_P(obj) ? HeapGraphBuilder::kNotFound
                                                    : s->builder->Find(static_cast<uint64_t>(obj)));
    }
  }
  s->peak_bytes = std::max(s->peak_bytes, s->builder->MemoryBytes());
  s->graph = s->builder->Finish();
  s->graph_pins = true;
  s->builder.reset();
  int64_t t1 = MonotonicNs();
  s->walk_ns = t1 - t0;
  NameEdges(s);
  s->name_ns = MonotonicNs() - t1;
  // From here on the graph is plain numbers: no VALUE is dereferenced again.
  s->graph_pins = false;
  rb_thread_call_without_gvl(AnalyzeWithoutGvl, s, nullptr, nullptr);
  if (!s->error.empty()) rb_raise(eFathomError, "fathom: analyzing the heap snapshot failed: %s", s->error.c_str());
  a->paths = rb_ary_new_capa(static_cast<long>(focus_nodes.size()));
  for (uint32_t node : focus_nodes) {
    if (node == HeapGraphBuilder::kNotFound || s->idom[node] == kUnreachable) {
      rb_ary_push(a->paths, Qnil);
      continue;
    }
    VALUE path = rb_ary_new();
    std::vector<uint32_t> chain = DominatorPath(s->idom, node);  // node first, super-root last
    for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
      if (*it == HeapGraph::kSuperRoot) continue;
      std::string name = FrameName(s->graph, s->idom, *it);
      rb_ary_push(path, rb_utf8_str_new(name.data(), static_cast<long>(name.size())));
    }
    rb_ary_push(a->paths, path);
  }
  return Qnil;
}

// take(gc, progress_io_or_nil, focus_array_or_nil) -> Array of reference
// paths (Array of frame names, root first; nil when not found) for focus.
VALUE SnapshotTake(VALUE self, VALUE gc, VALUE progress, VALUE focus) {
  Snapshot* s = Get(self);
  if (!kHeapWalkAvailable)
    rb_raise(rb_eNotImpError, "fathom: this Ruby does not export rb_objspace_reachable_objects_from; retention snapshots are unavailable");
  if (s->taken) rb_raise(eFathomError, "fathom: this heap snapshot was already taken");
  if (!NIL_P(focus)) Check_Type(focus, T_ARRAY);
  if (g_snapshot_in_progress) rb_raise(eFathomError, "fathom: another heap snapshot is in progress in this process");
  if (RTEST(gc)) rb_gc_start();
  g_snapshot_in_progress = true;
  s->taken = true;
  s->progress = progress;
  s->skip_children_of = focus;
  s->started_ns = MonotonicNs();
  s->time_nanos = RealtimeNs();
  VALUE was_disabled = rb_gc_disable();
  TakeArgs args{s, focus, Qnil};
  int state = 0;
  rb_protect(TakeBody, reinterpret_cast<VALUE>(&args), &state);
  if (!RTEST(was_disabled)) rb_gc_enable();
  s->builder.reset();
  s->graph_pins = false;
  s->skip_children_of = Qnil;
  g_snapshot_in_progress = false;
  if (state) rb_jump_tag(state);
  if (s->progress_shown) Progress(s, "done", s->graph.node_count());
  s->progress = Qnil;
  return args.paths;
}

void* EncodeWithoutGvl(void* arg) {
  auto* pair = static_cast<std::pair<Snapshot*, std::string>*>(arg);
  Snapshot* s = pair->first;
  RetentionProfileOptions options;
  options.max_depth = s->max_depth;
  options.time_nanos = s->time_nanos;
  options.duration_nanos = s->walk_ns + s->name_ns;
  options.comment = "fathom retention profile: stacks are dominator paths from the GC roots";
  try {
    pair->second = EncodeRetentionProfile(s->graph, s->idom, s->retained, options);
  } catch (const std::exception& e) {
    s->error = e.what();
  }
  return nullptr;
}

Snapshot* GetTaken(VALUE self) {
  Snapshot* s = Get(self);
  if (!s->taken || s->idom.empty()) rb_raise(eFathomError, "fathom: heap snapshot not taken yet");
  return s;
}

VALUE SnapshotEncode(VALUE self) {
  Snapshot* s = GetTaken(self);
  std::pair<Snapshot*, std::string> job{s, {}};
  int64_t t0 = MonotonicNs();
  rb_thread_call_without_gvl(EncodeWithoutGvl, &job, nullptr, nullptr);
  s->encode_ns = MonotonicNs() - t0;
  if (!s->error.empty()) rb_raise(eFathomError, "fathom: encoding the retention profile failed: %s", s->error.c_str());
  return rb_str_new(job.second.data(), static_cast<long>(job.second.size()));
}

VALUE SnapshotStats(VALUE self) {
  Snapshot* s = GetTaken(self);
  VALUE h = rb_hash_new();
  auto set = [&](const char* key, long long v) { rb_hash_aset(h, ID2SYM(rb_intern(key)), LL2NUM(v)); };
  const HeapGraph& g = s->graph;
  set("objects", static_cast<long long>(g.node_count() - g.first_object_node()));
  set("edges", static_cast<long long>(s->edge_count));
  set("root_categories", static_cast<long long>(g.category_count()));
  set("walk_ns", s->walk_ns);
  set("name_ns", s->name_ns);
  set("gvl_held_ns", s->walk_ns + s->name_ns);
  set("analyze_ns", s->analyze_ns);
  set("encode_ns", s->encode_ns);
  set("graph_bytes", static_cast<long long>(s->graph_bytes));
  set("peak_builder_bytes", static_cast<long long>(s->peak_bytes));
  set("dominator_bytes", static_cast<long long>(s->idom.capacity() * 4 + s->retained.capacity() * 8));
  set("dominator_peak_bytes", static_cast<long long>(s->dominator_peak_bytes));
  return h;
}

}  // namespace

void InitHeapSnapshot(VALUE mNative, VALUE eError) {
  eFathomError = eError;
  id_binding = rb_intern("binding");
  id_local_variables = rb_intern("local_variables");
  id_local_variable_get = rb_intern("local_variable_get");
  id_keys = rb_intern("keys");
  id_thread_variables = rb_intern("thread_variables");
  id_thread_variable_get = rb_intern("thread_variable_get");
  id_global_variables = rb_intern("global_variables");
  id_write = rb_intern("write");
  id_members = rb_intern("members");
  cThread = rb_cThread;
  cBinding = rb_const_get(rb_cObject, rb_intern("Binding"));

  VALUE klass = rb_define_class_under(mNative, "HeapSnapshot", rb_cObject);
  rb_gc_register_mark_object(klass);
  rb_define_alloc_func(klass, SnapshotAlloc);
  rb_define_method(klass, "initialize", RUBY_METHOD_FUNC(SnapshotInitialize), 1);
  rb_define_method(klass, "take", RUBY_METHOD_FUNC(SnapshotTake), 3);
  rb_define_method(klass, "encode", RUBY_METHOD_FUNC(SnapshotEncode), 0);
  rb_define_method(klass, "stats", RUBY_METHOD_FUNC(SnapshotStats), 0);
}

}  // namespace fathom
