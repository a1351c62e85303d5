#include "ruby/keywords.h"

#include <cstring>

#include "ruby/runtime/boundary.h"

namespace fathom {

namespace {

// rb_hash_foreach's callback: stops at the first key that is not one of
// the names (Ruby calls it: nothing may throw through it).
struct UnknownKeySearch {
  std::initializer_list<const char*> names;
  VALUE found = Qundef;
};

int FindUnknownKey(VALUE key, VALUE, VALUE arg) {
  return NoThrow("keywords", static_cast<int>(ST_STOP), [&] {
    auto* search = reinterpret_cast<UnknownKeySearch*>(arg);
    if (SYMBOL_P(key)) {
      const char* text = rb_id2name(SYM2ID(key));
      for (const char* name : search->names)
        if (text != nullptr && std::strcmp(text, name) == 0) return static_cast<int>(ST_CONTINUE);
    }
    search->found = key;
    return static_cast<int>(ST_STOP);
  });
}

}  // namespace

Keywords::Keywords(int argc, const VALUE* argv, std::initializer_list<const char*> names, const char* where)
    : hash_(argc == 1 ? argv[0] : Qnil), where_(where) {
  if (!RB_TYPE_P(hash_, T_HASH)) ThrowArgumentError("fathom: %s takes keyword arguments only", where_);
  for (const char* name : names)
    if (Get(name) == Qundef) ThrowArgumentError("fathom: %s: missing keyword %s", where_, name);
  UnknownKeySearch search{names};
  rb_hash_foreach(hash_, FindUnknownKey, reinterpret_cast<VALUE>(&search));
  if (search.found != Qundef) {
    if (SYMBOL_P(search.found)) ThrowArgumentError("fathom: %s: unknown keyword %s", where_, rb_id2name(SYM2ID(search.found)));
    ThrowArgumentError("fathom: %s: keywords must be Symbols", where_);
  }
}

VALUE Keywords::Get(const char* name) const { return rb_hash_lookup2(hash_, ID2SYM(rb_intern(name)), Qundef); }

int64_t Keywords::Integer(const char* name, int64_t min) const {
  VALUE v = Get(name);
  if (!RB_INTEGER_TYPE_P(v)) ThrowTypeError("fathom: %s: %s must be an Integer", where_, name);
  long long n = 0;
  Protect([&] { n = NUM2LL(v); });  // a Bignum beyond int64_t raises RangeError
  if (n < min) ThrowArgumentError("fathom: %s: %s must be at least %lld, got %lld", where_, name, static_cast<long long>(min), n);
  return n;
}

bool Keywords::Boolean(const char* name) const {
  VALUE v = Get(name);
  if (v != Qtrue && v != Qfalse) ThrowTypeError("fathom: %s: %s must be true or false", where_, name);
  return v == Qtrue;
}

const char* Keywords::SymbolName(const char* name) const {
  VALUE v = Get(name);
  if (!SYMBOL_P(v)) ThrowTypeError("fathom: %s: %s must be a Symbol", where_, name);
  return rb_id2name(SYM2ID(v));
}

}  // namespace fathom
