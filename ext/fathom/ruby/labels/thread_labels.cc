#include "ruby/labels/thread_labels.h"

#include "labels/label_sets.h"
#include "ruby/init.h"
#include "ruby/native_class.h"
#include "ruby/runtime/boundary.h"

namespace fathom {
namespace {

// initial-exec: the variables live in the static TLS block the loader sets
// up for every thread, at a fixed offset from the thread pointer: a read is
// one load. The default model for a dlopen'd library (general-dynamic) goes
// through __tls_get_addr, which on a thread's first access to this
// library's TLS allocates its block with malloc: not allowed in a signal
// handler (the thread may have been interrupted inside malloc). glibc keeps
// spare static TLS room for dlopen'd libraries using initial-exec (12 bytes
// here); ruby/runtime/gvl_owner.cc does the same.
__attribute__((tls_model("initial-exec"))) thread_local uint32_t t_label_set = 0;
__attribute__((tls_model("initial-exec"))) thread_local uint64_t t_span_id = 0;

// Ruby 3.1 hands a finished thread's native thread to the next Ruby thread
// (its thread cache): labels a thread set with Labels.set and never restored
// must not reach the next one. RUBY_EVENT_THREAD_END is not enough: 3.1
// fires it only for a thread whose block returned, not for one ended by an
// exception, Thread#kill or Thread#exit (3.3 and 3.4 fire it for every end).
// RUBY_EVENT_THREAD_BEGIN fires on every Ruby version for every new
// thread, on its native thread, before its block runs: clearing there
// covers every way the previous thread of that native thread ended. Both
// run with the GVL. Added the first time a thread sets labels or a span
// (so before any thread that could leave them behind ends), kept.
bool g_thread_hooks_added = false;

void ClearThreadLabels(rb_event_flag_t, VALUE, VALUE, ID, VALUE) {
  t_label_set = 0;
  t_span_id = 0;
}

void EnsureThreadHooks() {
  if (g_thread_hooks_added) return;
  rb_add_event_hook(ClearThreadLabels, RUBY_EVENT_THREAD_BEGIN | RUBY_EVENT_THREAD_END, Qnil);
  g_thread_hooks_added = true;
}

LabelPairs PairsFrom(VALUE pairs) {
  if (!RB_TYPE_P(pairs, T_ARRAY)) ThrowTypeError("fathom: labels must be an Array of [String, String] pairs");
  LabelPairs out;
  for (long i = 0; i < RARRAY_LEN(pairs); i++) {
    VALUE pair = RARRAY_AREF(pairs, i);
    if (!RB_TYPE_P(pair, T_ARRAY) || RARRAY_LEN(pair) != 2 || !RB_TYPE_P(RARRAY_AREF(pair, 0), T_STRING) ||
        !RB_TYPE_P(RARRAY_AREF(pair, 1), T_STRING))
      ThrowTypeError("fathom: labels must be an Array of [String, String] pairs");
    VALUE k = RARRAY_AREF(pair, 0), v = RARRAY_AREF(pair, 1);
    out.emplace_back(std::string(RSTRING_PTR(k), RSTRING_LEN(k)), std::string(RSTRING_PTR(v), RSTRING_LEN(v)));
  }
  return out;
}

// Native::Labels.intern([[key, value], ...]) -> id. lib/fathom/labels.rb
// validates names, sizes and count first.
VALUE Intern(VALUE, VALUE pairs) {
  return RubyMethod([&] { return UINT2NUM(LabelSets::Global().Intern(PairsFrom(pairs))); });
}

// Native::Labels.current_set = id (an id intern returned; 0 clears).
VALUE SetCurrentSet(VALUE, VALUE id) {
  return RubyMethod([&] {
    if (!RB_INTEGER_TYPE_P(id)) ThrowTypeError("fathom: label set id must be an Integer");
    unsigned long long n = NUM2ULL(id);
    if (n != 0 && LabelSets::Global().Get(static_cast<uint32_t>(n)).empty())
      ThrowArgumentError("fathom: unknown label set id %llu", n);
    if (n != 0) EnsureThreadHooks();
    t_label_set = static_cast<uint32_t>(n);
    return id;
  });
}

VALUE CurrentSet(VALUE) { return UINT2NUM(t_label_set); }

// Native::Labels.span_id = Integer (1..2**64-1) or nil.
VALUE SetSpanId(VALUE, VALUE span) {
  return RubyMethod([&] {
    if (NIL_P(span)) {
      t_span_id = 0;
      return span;
    }
    if (!RB_INTEGER_TYPE_P(span)) ThrowTypeError("fathom: span_id must be an Integer or nil");
    // rb_integer_pack: the sign (-1, 0, +1), or +-2 if it did not fit in
    // 64 bits; never raises.
    uint64_t value = 0;
    int sign = rb_integer_pack(span, &value, 1, sizeof value, 0, INTEGER_PACK_LSWORD_FIRST | INTEGER_PACK_NATIVE_BYTE_ORDER);
    if (sign != 1) ThrowArgumentError("fathom: span_id must be in 1..2**64-1");
    EnsureThreadHooks();
    t_span_id = value;
    return span;
  });
}

VALUE SpanId(VALUE) { return t_span_id == 0 ? Qnil : ULL2NUM(t_span_id); }

// Native::Labels.pairs(id) -> [[key, value], ...] sorted by key.
VALUE Pairs(VALUE, VALUE id) {
  return RubyMethod([&] {
    const LabelPairs& pairs = LabelSets::Global().Get(static_cast<uint32_t>(NUM2UINT(id)));
    VALUE out = rb_ary_new_capa(static_cast<long>(pairs.size()));
    for (const auto& [k, v] : pairs)
      rb_ary_push(out, rb_assoc_new(rb_utf8_str_new(k.data(), static_cast<long>(k.size())),
                                    rb_utf8_str_new(v.data(), static_cast<long>(v.size()))));
    return out;
  });
}

// Native::Labels.stats -> {sets:, max_sets:, overflowed:}
VALUE Stats(VALUE) {
  return RubyMethod([&] {
    const LabelSets& t = LabelSets::Global();
    VALUE h = rb_hash_new();
    rb_hash_aset(h, ID2SYM(rb_intern("sets")), ULL2NUM(t.size()));
    rb_hash_aset(h, ID2SYM(rb_intern("max_sets")), ULL2NUM(t.max_sets()));
    rb_hash_aset(h, ID2SYM(rb_intern("overflowed")), ULL2NUM(t.overflowed()));
    return h;
  });
}

}  // namespace

ThreadLabels CurrentThreadLabels() { return ThreadLabels{t_label_set, t_span_id}; }

void InitThreadLabels(VALUE mNative) {
  VALUE m = rb_define_module_under(mNative, "Labels");
  DefineModuleFunctions(m, {{"intern", Method(Intern)}, {"current_set=", Method(SetCurrentSet)},
                            {"current_set", Method(CurrentSet)}, {"span_id=", Method(SetSpanId)},
                            {"span_id", Method(SpanId)}, {"pairs", Method(Pairs)}, {"stats", Method(Stats)}});
}

}  // namespace fathom
