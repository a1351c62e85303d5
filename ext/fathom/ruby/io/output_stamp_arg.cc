#include "ruby/io/output_stamp_arg.h"

#include <string>

#include "ruby/runtime/boundary.h"

namespace fathom {

namespace {

// A String's bytes; TypeError naming `what` for anything else.
std::string StringArg(VALUE v, const char* what) {
  if (!RB_TYPE_P(v, T_STRING)) ThrowTypeError("fathom: %s must be a String", what);
  return std::string(RSTRING_PTR(v), static_cast<size_t>(RSTRING_LEN(v)));
}

}  // namespace

OutputStamp OutputStampArg(VALUE stamp) {
  OutputStamp out;
  if (NIL_P(stamp)) return out;
  if (!RB_TYPE_P(stamp, T_ARRAY) || RARRAY_LEN(stamp) != 2) {
    ThrowTypeError("fathom: stamp must be nil or [lines, default_sample_type] (Fathom::ProcessComments.stamp)");
  }
  VALUE lines = rb_ary_entry(stamp, 0);
  VALUE default_type = rb_ary_entry(stamp, 1);
  if (!RB_TYPE_P(lines, T_ARRAY)) ThrowTypeError("fathom: a stamp's lines must be an Array of Strings");
  for (long i = 0; i < RARRAY_LEN(lines); i++) out.comments.push_back(StringArg(rb_ary_entry(lines, i), "a stamp line"));
  if (!NIL_P(default_type)) out.default_sample_type = StringArg(default_type, "a stamp's default sample type");
  out.window = true;
  return out;
}

}  // namespace fathom
