// Entry point of the native extension: defines Fathom::Native and its
// classes. Fathom::Error is shared with lib/fathom/error.rb: whichever is
// loaded first defines it, the other reuses it.
#include <ruby.h>

#include "ruby/init.h"
#include "ruby/runtime/boundary.h"
#include "ruby/fork/fork_child_reset.h"
#include "ruby/runtime/thread_registry.h"

extern "C" __attribute__((visibility("default"))) void Init_fathom_ext(void) {
  VALUE mFathom = rb_define_module("Fathom");
  VALUE eError = rb_const_defined_at(mFathom, rb_intern("Error"))
                     ? rb_const_get_at(mFathom, rb_intern("Error"))
                     : rb_define_class_under(mFathom, "Error", rb_eStandardError);
  fathom::eFathomError = eError;
  rb_gc_register_address(&fathom::eFathomError);
  fathom::InitFaultInjection();
  VALUE mNative = rb_define_module_under(mFathom, "Native");
  // Native.internal_errors -> {count:, last_site:}: C++ exceptions caught at
  // a callback Ruby called (a hook, a GC callback) and survived.
  rb_define_module_function(
      mNative, "internal_errors",
      [](VALUE) -> VALUE {
        VALUE h = rb_hash_new();
        rb_hash_aset(h, ID2SYM(rb_intern("count")), ULL2NUM(fathom::InternalErrorCount()));
        const char* site = fathom::LastInternalErrorSite();
        rb_hash_aset(h, ID2SYM(rb_intern("last_site")), site ? rb_str_new_cstr(site) : Qnil);
        return h;
      },
      0);
  // Native.fault_injection? -> whether FATHOM_INJECT_FAULT works in this build.
  rb_define_module_function(
      mNative, "fault_injection?", [](VALUE) -> VALUE { return fathom::FaultInjectionBuilt() ? Qtrue : Qfalse; }, 0);
  fathom::InitForkChildReset(mNative);
  fathom::InitRactorGuard(mNative);
  fathom::InitThreadRegistry();
  fathom::InitHeapTick(mNative);
  fathom::InitHeapCollector(mNative);
  fathom::InitGcCollector(mNative);
  fathom::InitCpuCollector(mNative);
  fathom::InitFirefoxParts(mNative);
  fathom::InitRetentionSnapshot(mNative);
  fathom::InitStackScrub(mNative);
  fathom::InitNewFile(mNative);
  fathom::InitMallocTrim(mNative);
  fathom::InitThreadLabels(mNative);
  fathom::InitProcessMemory(mNative);
#ifdef FATHOM_DUMP_READER  // extconf.rb: only with simdjson
  fathom::InitDumpAnalysis(mNative);
#endif
}
