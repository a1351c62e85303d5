// "In progress" state that a process forked from the app must not keep.
//
// A heap dump or a retention snapshot waiting for its child, and a heap
// flush taking its census with GC off, set process-wide state on one
// thread and clear it when they end. fork() copies that state but only the
// forking thread: in a process forked meanwhile (by another thread of the
// app: a puma worker, a job runner, Process.fork) the operation never ends,
// and its state stayed set for the child's whole life: every
// Fathom.heap_dump there raised "another heap dump is in progress", and a
// fork during a census left the child with GC off for good.
//
// Each owner registers a reset at Init; Fathom::Native.after_fork_child
// runs them all, from ForkHooks (lib/fathom/process/fork_hooks.rb) in
// every child forked through Process._fork or Process.daemon, before any
// other hook of Fathom's. Not a pthread_atfork handler: those run in
// Fathom's own forked children too, where GC must stay off, and a reset
// may call Ruby's C API (rb_gc_enable), which belongs with the GVL in a
// Ruby method, not inside fork().
#pragma once

#include <ruby.h>

namespace fathom {

using ForkChildReset = void (*)();

// Registers `reset` (at Init, with the GVL). At most a handful: a fixed
// table, so that the child's hook allocates nothing.
void ResetInForkedChild(ForkChildReset reset);

// Fathom::Native.after_fork_child (Init_fathom_ext calls it first, before
// the owners register).
void InitForkChildReset(VALUE mNative);

}  // namespace fathom
