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
#if defined(HAVE_RB_OBJSPACE_REACHABLE_OBJECTS_FROM) && defined(HAVE_RB_OBJSPACE_REACHABLE_OBJECTS_FROM_ROOT)
#define FATHOM_HAVE_HEAP_WALK 1
// gc.c, Ruby 2.1+ (what ObjectSpace.reachable_objects_from and
// .reachable_objects_from_root call). The callback gets each object the
// given object marks (its references), or each root with its category
// name. Must not be called during GC. Signatures checked against gc.c of
// 3.1 and 3.4 (unchanged).
void rb_objspace_reachable_objects_from(VALUE obj, void (*func)(VALUE, void*), void* data);
void rb_objspace_reachable_objects_from_root(void (*func)(const char* category, VALUE, void*), void* data);
#endif
}
