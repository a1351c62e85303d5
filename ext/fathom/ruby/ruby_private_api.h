// Functions libruby exports but no installed header declares. We declare
// them ourselves (DESIGN.md: public API only; exported-but-undeclared
// functions are allowed with our own prototypes behind have_func checks) —
// no internal structs are copied. extconf.rb's have_func sets HAVE_*.
#pragma once

#include <ruby.h>

extern "C" {
#ifdef HAVE_RUBY_THREAD_HAS_GVL_P
// thread.c, all Rubies since 1.9: does the calling native thread hold the
// GVL? Reads a thread-local and one field: safe in a signal handler.
int ruby_thread_has_gvl_p(void);
#endif
#ifdef HAVE_RB_OBJ_MEMSIZE_OF
// gc.c (what ObjectSpace.memsize_of calls).
size_t rb_obj_memsize_of(VALUE obj);
#endif
}
