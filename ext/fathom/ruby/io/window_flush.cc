#include "ruby/io/window_flush.h"

namespace fathom {

bool FirefoxFormatArg(VALUE format) {
  static const VALUE pprof = ID2SYM(rb_intern("pprof"));
  static const VALUE firefox = ID2SYM(rb_intern("firefox"));
  if (format == pprof) return false;
  if (format == firefox) return true;
  VALUE shown = Qnil;
  Protect([&] { shown = rb_inspect(format); });
  ThrowArgumentError("fathom: format must be :pprof or :firefox, got %.*s", static_cast<int>(RSTRING_LEN(shown)),
                     RSTRING_PTR(shown));
}

}  // namespace fathom
