#include "ruby/heap/liveness_tokens.h"

#include <string>

#include <ruby/version.h>

#include "ruby/runtime/boundary.h"

// object_id tokens need ObjectSpace._id2ref to answer only for the object
// an id was given to, and the public RUBY_FL_SEEN_OBJ_ID flag (LookupAt).
// Ruby 4.0 breaks both: _id2ref is deprecated and can return another live
// object for a dead one's id (Bug #22200), and the flag left the public
// header when ids moved into shapes. The Ruby layer refuses the mode first
// (Fathom::RubyGuards.liveness, which tests can point at a faked version);
// this is the native line behind it, for Native::HeapCollector.new called
// directly. docs/internals/versions.md, "Ruby 4.0".
#if RUBY_API_VERSION_MAJOR < 4 && defined(HAVE_CONST_RUBY_FL_SEEN_OBJ_ID)
#define FATHOM_OBJECT_ID_TOKENS 1
#endif

namespace fathom {

namespace {
// Resolved once, with the GVL, on first use.
struct Names {
  VALUE object_space;
  VALUE weak_map_class;
  ID id2ref, aset, aref;
};
const Names& GetNames() {
  static const Names names = [] {
    Names n;
    n.object_space = rb_const_get(rb_cObject, rb_intern("ObjectSpace"));
    n.weak_map_class = rb_const_get(n.object_space, rb_intern("WeakMap"));
    n.id2ref = rb_intern("_id2ref");
    n.aset = rb_intern("[]=");
    n.aref = rb_intern("[]");
    return n;
  }();
  return names;
}
}  // namespace

TokenKind LivenessTokens::ParseKind(VALUE name) {
  if (SYMBOL_P(name)) name = rb_sym2str(name);
  if (!RB_TYPE_P(name, T_STRING)) ThrowTypeError("liveness: expected :object_id or :weakmap");
  std::string s(RSTRING_PTR(name), static_cast<size_t>(RSTRING_LEN(name)));
  if (s == "object_id") {
#ifndef FATHOM_OBJECT_ID_TOKENS
    ThrowArgumentError("liveness: :object_id is not supported on Ruby 4.0 and later: ObjectSpace._id2ref is "
                       "deprecated there and can return another live object for a dead one's id (Ruby Bug #22200); "
                       "use :weakmap");
#endif
    return TokenKind::kObjectId;
  }
  if (s == "weakmap") return TokenKind::kWeakMap;
  ThrowArgumentError("liveness: expected :object_id or :weakmap, got %s", s.c_str());
}

const char* LivenessTokens::KindName(TokenKind kind) {
  return kind == TokenKind::kWeakMap ? "weakmap" : "object_id";
}

uint64_t LivenessTokens::Track(VALUE obj) {
  if (kind_ == TokenKind::kObjectId) return NUM2ULL(rb_obj_id(obj));  // no method call
  const Names& n = GetNames();
  if (NIL_P(weak_map_)) weak_map_ = rb_class_new_instance(0, nullptr, n.weak_map_class);
  uint64_t token = next_token_++;
  VALUE map = weak_map_;
  bool ok = TryProtect([&] { rb_funcall(map, n.aset, 2, ULL2NUM(token), obj); });
  return ok ? token : kUntracked;
}

VALUE LivenessTokens::LookupAt(uint64_t token, VALUE candidate) {
#ifdef FATHOM_OBJECT_ID_TOKENS
  if (kind_ != TokenKind::kObjectId || !RB_FL_TEST_RAW(candidate, RUBY_FL_SEEN_OBJ_ID)) return Qundef;
  return NUM2ULL(rb_obj_id(candidate)) == token ? candidate : Qundef;
#else
  // Unreachable: ParseKind refuses object_id tokens on this Ruby.
  (void)token;
  (void)candidate;
  return Qundef;
#endif
}

VALUE LivenessTokens::Lookup(uint64_t token) {
  if (token == kUntracked) return Qundef;
  const Names& n = GetNames();
  VALUE found = Qnil;
  if (kind_ == TokenKind::kObjectId) {
    // RangeError once the object is dead (its id is gone with it).
    if (!TryProtect([&] { found = rb_funcall(n.object_space, n.id2ref, 1, ULL2NUM(token)); })) return Qundef;
    return found;
  }
  if (NIL_P(weak_map_)) return Qundef;
  VALUE map = weak_map_;
  if (!TryProtect([&] { found = rb_funcall(map, n.aref, 1, ULL2NUM(token)); })) return Qundef;
  return NIL_P(found) ? Qundef : found;
}

void LivenessTokens::Reset() {
  weak_map_ = Qnil;  // tokens keep counting: an old one can never match
}

void LivenessTokens::Mark() const {
  if (!NIL_P(weak_map_)) rb_gc_mark_movable(weak_map_);
}

void LivenessTokens::UpdateAfterCompaction() {
  if (!NIL_P(weak_map_)) weak_map_ = rb_gc_location(weak_map_);
}

}  // namespace fathom
