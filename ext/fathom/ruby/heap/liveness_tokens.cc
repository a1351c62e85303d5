#include "ruby/heap/liveness_tokens.h"

#include <string>

#include "ruby/runtime/boundary.h"

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
  if (s == "object_id") return TokenKind::kObjectId;
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
  if (kind_ != TokenKind::kObjectId || !RB_FL_TEST_RAW(candidate, RUBY_FL_SEEN_OBJ_ID)) return Qundef;
  return NUM2ULL(rb_obj_id(candidate)) == token ? candidate : Qundef;
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
