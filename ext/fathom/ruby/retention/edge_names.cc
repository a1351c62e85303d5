// Phase 2 of a retention snapshot: naming the edge that discovered each
// object (its tree edge), the one reports print: "@payload", "{\"key\"}",
// "LeakFixture::Registry::SESSIONS", "thread[:cache]", "(captured) → rows".
// For each referrer its named slots are listed once, through C-level
// lookups and the original core methods (see OriginalMethods), and matched
// against its unnamed tree children by identity; whatever is left is named
// after the referrer's class ("via Thread", "in vm").
#include <ruby.h>

#include <cctype>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/mapped_vector.h"
#include "base/utf8.h"
#include "ruby/runtime/boundary.h"
#include "retention/key_shape.h"
#include "ruby/retention/retention_snapshot.h"

namespace fathom {
namespace retention {
namespace {

// Hashes with more entries than this name their values "$hashval": one
// frame per key would split a big cache into thousands of slivers.
constexpr long kMaxNamedHashEntries = 32;
constexpr long kNamedArraySlots = 10;
constexpr size_t kMaxKeyLength = 40;

VALUE cBinding = Qnil, cFiber = Qnil;

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
    if (!map_.empty()) ChildMap().swap(map_);
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
  const MappedVector<std::pair<VALUE, uint32_t>>& items() const { return items_; }

 private:
  // Mapped (core/base/mapped_vector.h): for a 250k-element array these are
  // MBs, and a glibc block that size, once freed, raised glibc's mmap
  // threshold so far that the arenas kept tens of MB (docs/internals/serving.md,
  // "Memory after serving"). Only the bucket array is that big; the nodes
  // are small and come from operator new.
  using ChildMap = std::unordered_map<VALUE, uint32_t, std::hash<VALUE>, std::equal_to<VALUE>,
                                      MappedAllocator<std::pair<const VALUE, uint32_t>>>;
  MappedVector<std::pair<VALUE, uint32_t>> items_;
  ChildMap map_;
};

struct Namer {
  HeapGraph& g;
  const Snapshot* s;
  ChildIndex children;
  // Names of a proc's (or binding's) captured locals, by value, waiting for
  // the env objects they live in to be named.
  // Also a thread's fiber-local variables, waiting for its Fiber object
  // (3.3 reaches them through the thread's main fiber, not the thread).
  std::unordered_map<uint32_t, std::vector<std::pair<VALUE, std::string>>> env_locals;  // child node -> names
  std::vector<std::pair<VALUE, std::string>> globals;  // value -> "$name"
  // Whether hash keys that are data (Strings, dynamic Symbols) are named by
  // their bytes (opt-in, local debugging) or by their shape (KeyShape).
  bool string_contents = false;

  void Name(VALUE obj, const std::string& name) {
    uint32_t child = children.Find(obj);
    if (child != UINT32_MAX && g.edge_name(child) == 0) g.SetEdgeName(child, name);
  }
};

std::string IdName(ID id) {
  // rb_id2str gives 0 (not nil) for an ID without a name (Ruby's internal
  // ivars); reading it as a String crashed a snapshot (seen once in
  // test/integration/retention_test.rb). RTEST covers 0 and nil.
  VALUE str = rb_id2str(id);
  return !RTEST(str) ? std::string() : std::string(RSTRING_PTR(str), static_cast<size_t>(RSTRING_LEN(str)));
}

std::string StrOf(VALUE str) { return std::string(RSTRING_PTR(str), static_cast<size_t>(RSTRING_LEN(str))); }

// rb_ivar_foreach's callback (Ruby's C frames: nothing may be thrown through).
int IvarCallback(ID key, VALUE val, st_data_t arg) {
  return NoThrow("retention ivar callback", ST_STOP, [&] {
    Namer* n = reinterpret_cast<Namer*>(arg);
    if (RB_SPECIAL_CONST_P(val)) return ST_CONTINUE;
    std::string name = IdName(key);
    // Internal ivars (no "@": __classpath__, __attached__...) keep the fallback name.
    if (!name.empty() && name[0] == '@') n->Name(val, name);
    return ST_CONTINUE;
  });
}

// rb_ivar_foreach's callback collecting (value, "@name") pairs.
int CollectIvar(ID key, VALUE val, st_data_t arg) {
  return NoThrow("retention ivar callback", ST_STOP, [&] {
    if (RB_SPECIAL_CONST_P(val)) return ST_CONTINUE;
    std::string name = IdName(key);
    if (!name.empty() && name[0] == '@')
      reinterpret_cast<std::vector<std::pair<VALUE, std::string>>*>(arg)->emplace_back(val, name);
    return ST_CONTINUE;
  });
}

// Ruby 4.0 keeps the instance variables of classes, modules and
// non-T_OBJECT objects in a companion imemo (IsFieldsImemo), the owner's
// only child that holds them: the names wait for it, as a proc's captured
// locals wait for its env ("Foo (Class) → (instance variables) → @cache").
void DeferIvarsToFields(Namer& n, VALUE obj) {
  // A T_OBJECT keeps its own; most others have none (a big Array's
  // children are not scanned for nothing).
  if (RB_BUILTIN_TYPE(obj) == RUBY_T_OBJECT || rb_ivar_count(obj) == 0) return;
  for (auto& item : n.children.items()) {
    if (!IsFieldsImemo(item.first)) continue;
    std::vector<std::pair<VALUE, std::string>> ivars;
    rb_ivar_foreach(obj, CollectIvar, reinterpret_cast<st_data_t>(&ivars));
    n.g.SetEdgeName(item.second, "(instance variables)");
    n.env_locals[item.second] = std::move(ivars);
    return;
  }
}

bool Printable(const std::string& s) {
  if (s.empty() || s.size() > kMaxKeyLength) return false;
  for (unsigned char c : s)
    if (c < 0x20 || c == 0x7f) return false;
  return true;
}

// A key's bytes as a name: a binary key (a digest, a packed id) keeps its
// bytes readable as "\xNN" instead of reaching the profile as ill-formed
// UTF-8, which the string table would only replace with U+FFFD.
std::string KeyText(VALUE str) { return EscapeInvalidUtf8(StrOf(str)); }

// "{:name}", "{\"key\"}", "{42}", or "" when the key is not small and printable.
// Only built-in key types, formatted here: no user #inspect runs.
//
// A String key is the program's data, not its code (API_CLIENTS =
// {"sk_live_…" => client}), and profiles leave the machine: unless
// string_contents, it is named by its shape only, `{"…" 32 bytes #8bcd}`
// (core/retention/key_shape.h: length and a 16-bit unkeyed hash, the same
// in every snapshot and process, so diffs still match). Any String key gets
// a shape, binary or long ones included: the shape is small and printable
// whatever the key. A Symbol key is an identifier of the program and keeps
// its name, unless it is a dynamic Symbol (String#to_sym of a name the
// program never interned: `token.to_sym`, JSON's symbolize_names), which is
// data again and shaped like a String key.
std::string KeyLabel(VALUE key, bool string_contents) {
  if (RB_FIXNUM_P(key)) return "{" + std::to_string(FIX2LONG(key)) + "}";
  if (RB_SYMBOL_P(key)) {
    if (!string_contents && RB_DYNAMIC_SYM_P(key)) return "{" + KeyShape(StrOf(rb_sym2str(key)), true) + "}";
    std::string name = KeyText(rb_sym2str(key));
    return Printable(name) ? "{:" + name + "}" : "";
  }
  if (RB_TYPE_P(key, T_STRING) && rb_obj_class(key) == rb_cString) {
    if (!string_contents) return "{" + KeyShape(StrOf(key)) + "}";
    std::string text = KeyText(key);
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

// rb_hash_foreach's callback (Ruby's C frames: nothing may be thrown through).
int HashCallback(VALUE key, VALUE val, VALUE arg) {
  return NoThrow("retention hash callback", ST_STOP, [&] {
    auto* h = reinterpret_cast<HashNaming*>(arg);
    if (!RB_SPECIAL_CONST_P(val)) {
      std::string label = h->named_keys ? KeyLabel(key, h->n->string_contents) : "";
      h->n->Name(val, label.empty() ? "$hashval" : label);
    }
    if (!RB_SPECIAL_CONST_P(key)) h->n->Name(key, "$hashkey");
    return ST_CONTINUE;
  });
}

// The original methods of Ruby's core classes that naming needs, captured
// at load as UnboundMethods and called with bind_call: an application (or
// a gem) that overrides Thread#keys, Proc#binding, Binding#local_variables
// ... in a class of its own never runs inside a snapshot, where GC is
// disabled and the world is stopped. Struct members use rb_struct_members,
// constants rb_const_get_at, globals rb_gv_get: C-level, no method lookup.
struct OriginalMethods {
  VALUE thread_keys, thread_variables, thread_variable_get, thread_name, thread_native_thread_id;
  VALUE proc_binding, binding_local_variables, binding_local_variable_get;
  VALUE kernel_global_variables;
  VALUE thread_list;  // Thread.method(:list)
};
OriginalMethods g_methods;
ID id_bind_call;

// method.bind_call(recv, *args) under TryProtect: a StandardError (a
// C-implemented proc has no binding...) only leaves the names to the
// fallback; exit, kill and Interrupt pass on (as a RubyJump).
bool CallOriginal(VALUE method, VALUE recv, VALUE* out, VALUE arg = Qundef) {
  return TryProtect([&] {
    *out = arg == Qundef ? rb_funcall(method, id_bind_call, 1, recv) : rb_funcall(method, id_bind_call, 2, recv, arg);
  });
}

// rb_const_get_at, not Module#const_get: no method runs (a deprecated
// constant's warning aside, which TryProtect contains). Only for a
// constant that is defined: for a name in the table without a value (an
// autoload that already ran or failed) rb_const_get_at calls the module's
// const_missing, a Ruby method. Seen hanging a forked child, where its
// interrupt check tried to hand the GVL to a thread that does not exist
// there (docs/internals/retention.md, "Forked snapshots").
bool ConstGet(VALUE mod, ID id, VALUE* out) {
  if (!rb_const_defined_at(mod, id)) return false;
  return TryProtect([&] { *out = rb_const_get_at(mod, id); });
}

std::string ClassPath(VALUE mod) {
  VALUE path = rb_class_path_cached(mod);
  return NIL_P(path) ? "" : StrOf(path);
}

// st_foreach's callback (Ruby's C frames: nothing may be thrown through).
int CollectConstantId(st_data_t key, st_data_t, st_data_t arg) {
  return NoThrow("retention constant callback", ST_STOP, [&] {
    reinterpret_cast<std::vector<ID>*>(arg)->push_back(static_cast<ID>(key));
    return ST_CONTINUE;
  });
}

void NameConstants(Namer& n, VALUE mod) {
  std::string prefix = mod == rb_cObject ? "" : ClassPath(mod);
  if (mod != rb_cObject && prefix.empty()) prefix = "(anonymous)";
  // The constant names as rb_const_list lists them, without its Ruby
  // Array: a forked child allocates no Ruby object (GC is off there).
  std::vector<ID> ids;
  st_table* table = static_cast<st_table*>(rb_mod_const_at(mod, nullptr));
  st_foreach(table, CollectConstantId, reinterpret_cast<st_data_t>(&ids));
  st_free_table(table);
  for (ID id : ids) {
    // Never trigger an autoload from a profiler.
    if (!NIL_P(rb_autoload_p(mod, id))) continue;
    VALUE val;
    if (!ConstGet(mod, id, &val) || RB_SPECIAL_CONST_P(val)) continue;
    std::string name = IdName(id);
    n.Name(val, prefix.empty() ? name : prefix + "::" + name);
  }
}

// A binding's locals by value, for the env objects a proc or binding holds.
void CollectLocals(Namer& n, VALUE binding) {
  VALUE names;
  if (!CallOriginal(g_methods.binding_local_variables, binding, &names) || !RB_TYPE_P(names, T_ARRAY)) return;
  std::vector<std::pair<VALUE, std::string>> locals;
  for (long i = 0; i < RARRAY_LEN(names); i++) {
    VALUE sym = RARRAY_AREF(names, i), val;
    if (!CallOriginal(g_methods.binding_local_variable_get, binding, &val, sym) || RB_SPECIAL_CONST_P(val)) continue;
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

// Only real objects may be asked for their class: internal ones (imemo)
// keep other data in the class slot.
bool IsFiber(VALUE obj) {
  return RB_TYPE_P(obj, T_DATA) && RBASIC_CLASS(obj) != 0 && RTEST(rb_obj_is_kind_of(obj, cFiber));
}

// A thread's locals and variables by value (Ruby calls: the parent only).
void CollectThreadNames(VALUE thread, PreparedThread* t) {
  VALUE keys;
  if (CallOriginal(g_methods.thread_keys, thread, &keys) && RB_TYPE_P(keys, T_ARRAY)) {
    for (long i = 0; i < RARRAY_LEN(keys); i++) {
      VALUE key = RARRAY_AREF(keys, i);
      if (!RB_SYMBOL_P(key)) continue;
      VALUE val = rb_thread_local_aref(thread, SYM2ID(key));
      if (!RB_SPECIAL_CONST_P(val)) t->locals.emplace_back(val, "thread[:" + StrOf(rb_sym2str(key)) + "]");
    }
  }
  VALUE vars;
  if (CallOriginal(g_methods.thread_variables, thread, &vars) && RB_TYPE_P(vars, T_ARRAY)) {
    for (long i = 0; i < RARRAY_LEN(vars); i++) {
      VALUE key = RARRAY_AREF(vars, i), val;
      if (!CallOriginal(g_methods.thread_variable_get, thread, &val, key) || RB_SPECIAL_CONST_P(val)) continue;
      if (RB_SYMBOL_P(key)) t->variables.emplace_back(val, "thread_variable[:" + StrOf(rb_sym2str(key)) + "]");
    }
  }
}

const PreparedThread* FindPrepared(const Snapshot* s, VALUE thread) {
  for (const PreparedThread& t : s->prepared_threads)
    if (t.thread == thread) return &t;
  return nullptr;
}

void NameThread(Namer& n, VALUE thread) {
  PreparedThread collected;
  const PreparedThread* t = n.s->names_prepared ? FindPrepared(n.s, thread) : nullptr;
  if (t == nullptr && !n.s->names_prepared) {
    CollectThreadNames(thread, &collected);
    t = &collected;
  }
  if (t == nullptr) return;  // forked, and not alive when prepared: no names
  for (auto& local : t->locals) n.Name(local.first, local.second);
  if (!t->locals.empty()) {
    for (auto& item : n.children.items())
      if (IsFiber(item.first)) n.env_locals[item.second] = t->locals;
  }
  for (auto& var : t->variables) n.Name(var.first, var.second);
}

// A thread by its label, as the CPU profile's thread tracks show it:
// `thread "puma srv tp 001"` (Thread#name), `thread "main"`, else its
// native id, `thread 12345`. The edge that reaches a thread from its
// Ractor (or from anything that has no name of its own for it) gets it, so
// what a running request's stack holds reads `... → thread "request-1" →
// via Thread (Array)`, not `via Ractor → via Thread`.
std::string ThreadLabel(VALUE thread) {
  VALUE name;
  if (CallOriginal(g_methods.thread_name, thread, &name) && RB_TYPE_P(name, T_STRING))
    return "thread \"" + KeyText(name) + "\"";
  if (thread == rb_thread_main()) return "thread \"main\"";
  VALUE tid;
  if (CallOriginal(g_methods.thread_native_thread_id, thread, &tid) && RB_INTEGER_TYPE_P(tid))
    return "thread " + std::to_string(NUM2LL(tid));
  return "thread (ended)";  // no native thread any more
}

// Names the referrer's unnamed tree children that are threads by their
// label (after its own names: a constant, ivar or array slot holding a
// thread keeps that name).
void NameThreads(Namer& n) {
  for (auto& item : n.children.items()) {
    VALUE v = item.first;
    if (n.g.edge_name(item.second) != 0 || !RB_TYPE_P(v, T_DATA) || RBASIC_CLASS(v) == 0) continue;
    if (!RTEST(rb_obj_is_kind_of(v, rb_cThread))) continue;
    if (n.s->names_prepared) {
      // Forked: a thread not alive when the names were prepared has ended.
      const PreparedThread* t = FindPrepared(n.s, v);
      n.g.SetEdgeName(item.second, t != nullptr ? t->label : "thread (ended)");
    } else {
      n.g.SetEdgeName(item.second, ThreadLabel(v));
    }
  }
}

void CollectGlobals(std::vector<std::pair<VALUE, std::string>>* globals) {
  VALUE names;
  if (!CallOriginal(g_methods.kernel_global_variables, rb_mKernel, &names) || !RB_TYPE_P(names, T_ARRAY)) return;
  for (long i = 0; i < RARRAY_LEN(names); i++) {
    std::string name = StrOf(rb_sym2str(RARRAY_AREF(names, i)));
    // Plain names only: punctuation globals ($~, $_, $!...) are frame- or
    // thread-local or computed, and $FILENAME's getter reads ARGF (may open a file).
    bool plain = name.size() > 1 && (isalpha(static_cast<unsigned char>(name[1])) || name[1] == '_');
    for (size_t k = 2; plain && k < name.size(); k++)
      plain = isalnum(static_cast<unsigned char>(name[k])) || name[k] == '_';
    if (!plain || name == "$FILENAME") continue;
    VALUE val = Qnil;
    if (!TryProtect([&] { val = rb_gv_get(name.c_str()); })) continue;
    if (!RB_SPECIAL_CONST_P(val)) globals->emplace_back(val, name);
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
    NameThreads(n);
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
      VALUE members = rb_struct_members(obj);  // C-level: Struct#members overrides do not run
      if (RB_TYPE_P(members, T_ARRAY)) {
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
      if (n.s->forked && (rb_obj_is_proc(obj) || rb_obj_is_kind_of(obj, cBinding))) {
        // Proc#binding and Binding#local_variables have no C API and the
        // forked child calls no method: the env is "(captured)", its
        // locals are named "via <imemo>" (docs/internals/retention.md,
        // "Forked snapshots").
        for (auto& item : n.children.items())
          if (RB_BUILTIN_TYPE(item.first) == RUBY_T_IMEMO) n.g.SetEdgeName(item.second, "(captured)");
      } else if (rb_obj_is_proc(obj)) {
        VALUE binding;
        if (CallOriginal(g_methods.proc_binding, obj, &binding)) CollectLocals(n, binding);
      } else if (rb_obj_is_kind_of(obj, cBinding)) {
        CollectLocals(n, obj);
      } else if (rb_obj_is_kind_of(obj, rb_cThread)) {
        NameThread(n, obj);
      }
      break;
    default:
      break;
  }
  bool internal = type == RUBY_T_IMEMO || type == RUBY_T_ICLASS;
  if (!internal && (RBASIC_CLASS(obj) != 0 || type == RUBY_T_CLASS || type == RUBY_T_MODULE)) {
    rb_ivar_foreach(obj, IvarCallback, reinterpret_cast<st_data_t>(&n));
    DeferIvarsToFields(n, obj);
  }
  NameModules(n);
  NameThreads(n);
  // Whatever is left is named after the referrer's class.
  const std::string& cls = g.name(g.class_name(parent));
  std::string via = "via " + cls;
  for (auto& item : n.children.items())
    if (g.edge_name(item.second) == 0) g.SetEdgeName(item.second, via);
}

}  // namespace

void NameEdges(Snapshot* s) {
  FATHOM_FAULT_POINT("retention_edge_names");
  Namer n{s->graph, s, {}, {}, {}, s->string_contents};
  if (s->names_prepared)
    n.globals = s->prepared_globals;
  else
    CollectGlobals(&n.globals);
  HeapGraph& g = s->graph;
  for (uint32_t p = 1; p < g.node_count(); p++) {
    n.children.Reset(g, p);
    if (n.children.empty()) continue;
    NameChildrenOf(n, p);
    if ((p & (kProgressEvery - 1)) == 0) Progress(s, "naming references", p);
  }
}

void PrepareNames(Snapshot* s) {
  VALUE pins = rb_ary_new();
  s->prepared_pins = pins;  // marked by the snapshot: every VALUE below stays alive and in place
  CollectGlobals(&s->prepared_globals);
  for (auto& g : s->prepared_globals) rb_ary_push(pins, g.first);
  VALUE threads = Qnil;
  if (!TryProtect([&] { threads = rb_method_call(0, nullptr, g_methods.thread_list); }) || !RB_TYPE_P(threads, T_ARRAY))
    return;
  rb_ary_push(pins, threads);
  for (long i = 0; i < RARRAY_LEN(threads); i++) {
    VALUE thread = RARRAY_AREF(threads, i);
    if (!RB_TYPE_P(thread, T_DATA) || !RTEST(rb_obj_is_kind_of(thread, rb_cThread))) continue;
    s->prepared_threads.emplace_back();
    PreparedThread& t = s->prepared_threads.back();
    t.thread = thread;
    t.label = ThreadLabel(thread);
    CollectThreadNames(thread, &t);
    for (auto& l : t.locals) rb_ary_push(pins, l.first);
    for (auto& v : t.variables) rb_ary_push(pins, v.first);
  }
}

VALUE OriginalMethod(VALUE klass, const char* name) {
  VALUE m = rb_funcall(klass, rb_intern("instance_method"), 1, ID2SYM(rb_intern(name)));
  rb_gc_register_mark_object(m);
  return m;
}

void InitEdgeNames() {
  id_bind_call = rb_intern("bind_call");
  cBinding = rb_const_get(rb_cObject, rb_intern("Binding"));
  cFiber = rb_const_get(rb_cObject, rb_intern("Fiber"));
  g_methods.thread_keys = OriginalMethod(rb_cThread, "keys");
  g_methods.thread_variables = OriginalMethod(rb_cThread, "thread_variables");
  g_methods.thread_variable_get = OriginalMethod(rb_cThread, "thread_variable_get");
  g_methods.thread_name = OriginalMethod(rb_cThread, "name");
  g_methods.thread_native_thread_id = OriginalMethod(rb_cThread, "native_thread_id");
  g_methods.proc_binding = OriginalMethod(rb_cProc, "binding");
  g_methods.binding_local_variables = OriginalMethod(cBinding, "local_variables");
  g_methods.binding_local_variable_get = OriginalMethod(cBinding, "local_variable_get");
  g_methods.kernel_global_variables = OriginalMethod(rb_mKernel, "global_variables");
  g_methods.thread_list = rb_obj_method(rb_cThread, ID2SYM(rb_intern("list")));
  rb_gc_register_mark_object(g_methods.thread_list);
}

}  // namespace retention
}  // namespace fathom
