#include "frame_symbolizer.h"

#include <ruby/debug.h>

#include <string>

namespace fathom {

namespace {

std::string ToStdString(VALUE s) {
  if (!RB_TYPE_P(s, T_STRING)) return std::string();
  return std::string(RSTRING_PTR(s), static_cast<size_t>(RSTRING_LEN(s)));
}

}  // namespace

FrameSymbol SymbolizeFrame(VALUE frame) {
  FrameSymbol sym;
  // full_label is "block in Foo#bar" / "Foo.bar" / "<main>" for Ruby frames.
  // For C functions some Rubies return nil or a bare method name, so fall
  // back to the qualified method name ("Integer#times").
  VALUE label = rb_profile_frame_full_label(frame);
  VALUE qualified = rb_profile_frame_qualified_method_name(frame);
  if (NIL_P(label) || (RB_TYPE_P(qualified, T_STRING) && NIL_P(rb_profile_frame_path(frame)))) label = qualified;
  if (NIL_P(label)) label = rb_profile_frame_method_name(frame);
  sym.name = NIL_P(label) ? std::string("(unknown)") : ToStdString(label);

  VALUE path = rb_profile_frame_absolute_path(frame);
  if (NIL_P(path)) path = rb_profile_frame_path(frame);
  sym.filename = ToStdString(path);

  VALUE first_line = rb_profile_frame_first_lineno(frame);
  sym.first_line = RB_INTEGER_TYPE_P(first_line) ? NUM2LL(first_line) : 0;
  sym.resolved = true;
  return sym;
}

}  // namespace fathom
