// Functions libruby exports but no installed header declares. We declare
// them ourselves (docs/internals/ruby-binding.md, "Public Ruby C API only": exported-but-undeclared
// functions are allowed with our own prototypes behind have_func checks) —
// no internal structs are copied. extconf.rb's have_func sets HAVE_*.
// One piece of internal layout is read, not declared here: an imemo's type
// in its flag bits, to tell a block's env from compiled code
// (retention_walk.cc, ImemoIsEnv), checked by a probe at load and unused
// when the probe fails.
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
#if defined(HAVE_RB_OBJSPACE_EACH_OBJECTS) && defined(HAVE_RB_OBJSPACE_INTERNAL_OBJECT_P)
#define FATHOM_HAVE_SLOT_WALK 1
// gc.c, Ruby 1.9+ / 2.1+ (what ObjectSpace.each_object and
// ObjectSpace.count_objects_size call). each_objects finishes any lazy
// sweep, then calls back once per heap page with its slots [start, end),
// `stride` bytes apart (pages of several slot sizes on 3.2+); a nonzero
// return stops it. internal_object_p is true for free slots and for
// objects Ruby never shows (imemo, iclass, hidden, zombies). The callback
// must not allocate Ruby objects. Checked against gc.c of 3.1 and 3.3.
void rb_objspace_each_objects(int (*callback)(void* start, void* end, size_t stride, void* data), void* data);
int rb_objspace_internal_object_p(VALUE obj);
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
