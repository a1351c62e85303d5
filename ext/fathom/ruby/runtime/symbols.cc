#include "ruby/runtime/symbols.h"

#include <ruby/debug.h>

#include <cinttypes>
#include <cstdio>
#include <string>

#include "ruby/runtime/boundary.h"

namespace fathom {

namespace {

std::string ToStdString(VALUE s) {
  if (!RB_TYPE_P(s, T_STRING)) return std::string();
  return std::string(RSTRING_PTR(s), static_cast<size_t>(RSTRING_LEN(s)));
}

}  // namespace

FrameSymbol SymbolizeFrame(VALUE frame) {
  // full_label is "block in Foo#bar" / "Foo.bar" / "<main>" for Ruby frames
  // and "Integer#times" for C functions on 3.1. Each call below may allocate
  // a String, and a flush symbolizes thousands of frames while the heap may
  // be large (every allocation brings the next GC closer), so fallbacks are
  // asked for only when needed. The Ruby calls (which may raise) come first,
  // under Protect, before any C++ string exists.
  VALUE label = Qnil, path = Qnil, first_line = Qnil;
  Protect([&] {
    label = rb_profile_frame_full_label(frame);
    if (NIL_P(label)) label = rb_profile_frame_qualified_method_name(frame);
    if (NIL_P(label)) label = rb_profile_frame_method_name(frame);
    path = rb_profile_frame_absolute_path(frame);  // the iseq's own String: no allocation
    if (NIL_P(path)) path = rb_profile_frame_path(frame);
    first_line = rb_profile_frame_first_lineno(frame);
  });
  FrameSymbol sym;
  sym.name = NIL_P(label) ? std::string("(unknown)") : ToStdString(label);
  sym.filename = ToStdString(path);
  sym.first_line = RB_INTEGER_TYPE_P(first_line) ? NUM2LL(first_line) : 0;
  sym.resolved = true;
  RB_GC_GUARD(label);
  RB_GC_GUARD(path);
  return sym;
}

std::string ClassPathWithoutAllocating(VALUE klass) {
  VALUE path = rb_class_path_cached(klass);
  if (RB_TYPE_P(path, T_STRING)) return std::string(RSTRING_PTR(path), static_cast<size_t>(RSTRING_LEN(path)));
  VALUE meta_path = rb_class_path_cached(rb_obj_class(klass));  // Class, or a Class subclass
  std::string name = "#<";
  if (RB_TYPE_P(meta_path, T_STRING))
    name.append(RSTRING_PTR(meta_path), static_cast<size_t>(RSTRING_LEN(meta_path)));
  else
    name += "Class";
  char buf[32];
  snprintf(buf, sizeof buf, ":0x%016" PRIxPTR ">", static_cast<uintptr_t>(klass));
  return name + buf;
}

}  // namespace fathom
