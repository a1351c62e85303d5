// Fathom::Native.malloc_trim -> true when memory went back to the system,
// false when none could, nil where the C library has no malloc_trim (not
// glibc).
//
// Why: a retention snapshot builds its graph (tens of MB for a big heap)
// with malloc from whichever thread serves the request. glibc keeps freed
// memory in that thread's arena, so after the snapshot is freed the
// process's RSS stays up (measured: +22 MB after 5 snapshots of a 200k-object
// heap, 13 MB of it returned by malloc_trim). A server that serves
// /debug/fathom/retention calls this after each snapshot
// (lib/fathom/rack/endpoints.rb). It walks every arena, so it runs without
// the GVL.
#include "ruby/init.h"

#if defined(HAVE_MALLOC_TRIM)
#include <malloc.h>
#endif

#include "ruby/runtime/boundary.h"

namespace fathom {
namespace {

VALUE NativeMallocTrim(VALUE) {
#if defined(HAVE_MALLOC_TRIM)
  int released = 0;
  WithoutGvl([&released] { released = malloc_trim(0); });
  return released ? Qtrue : Qfalse;
#else
  return Qnil;
#endif
}

}  // namespace

void InitMallocTrim(VALUE mNative) {
  rb_define_module_function(mNative, "malloc_trim", RUBY_METHOD_FUNC(NativeMallocTrim), 0);
}

}  // namespace fathom
