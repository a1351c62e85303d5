// Entry point of the native extension: defines Fathom::Native and its
// classes. Fathom::Error is shared with lib/fathom/error.rb: whichever is
// loaded first defines it, the other reuses it.
#include <ruby.h>

#include "gc_collector.h"
#include "heap_snapshot.h"
#include "memory_collector.h"

extern "C" __attribute__((visibility("default"))) void Init_fathom_ext(void) {
  VALUE mFathom = rb_define_module("Fathom");
  VALUE eError = rb_const_defined_at(mFathom, rb_intern("Error"))
                     ? rb_const_get_at(mFathom, rb_intern("Error"))
                     : rb_define_class_under(mFathom, "Error", rb_eStandardError);
  VALUE mNative = rb_define_module_under(mFathom, "Native");
  fathom::InitMemoryCollector(mNative, eError);
  fathom::InitGcCollector(mNative, eError);
  fathom::InitHeapSnapshot(mNative, eError);
}
