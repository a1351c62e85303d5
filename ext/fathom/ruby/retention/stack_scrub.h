// Zeroing the dead part of the machine stack below the caller, so that a
// retention snapshot's conservative root (machine_context: every word of
// the snapshotting thread's C stack that looks like an object's address)
// does not find the objects Fathom's own code handled a moment before.
//
// What the scan covers is the stack from where the thread started down to
// the walk's frame. Frames of calls that have returned leave their words
// behind, and a later, deeper call chain (the walk itself) reuses that
// memory without writing every word of it: a slot it never writes still
// holds the address an earlier call kept there. Fathom's own work before
// a walk (picking the sampled objects to explain, the GC a snapshot runs
// first) passes the program's objects through such slots, and a stale
// address made them look held by the C stack: their dominator became the
// super-root, and "why still alive" lost its chain
// (docs/internals/retention.md, "Why the top sites are alive").
//
// Frames still running above the caller (the interpreter's, the
// program's) are not touched: only memory below the caller's frame, which
// no live frame uses, is written. The depth is bounded by what Ruby says
// is left of this thread's (or fiber's) stack (ruby_stack_check, public
// API), so it never goes past the guard Ruby keeps. Under AddressSanitizer
// a frame's locals may live on a fake stack instead: there this zeroes
// less than it says (a test build only).
#pragma once

namespace fathom {

// Zeroes up to 64 KiB of the machine stack below the caller's frame (less
// when Ruby's stack check says the stack is that close to its end). GVL
// held, outside GC; allocates nothing, calls no Ruby method.
void ScrubMachineStackBelow();

// Fathom::Native.with_stack_scrubbed { ... } -> the block's value (defined
// by InitStackScrub, ruby/init.h): runs the block one C frame below the
// caller (rb_yield starts an interpreter loop of its own there), then
// zeroes the stack it used. What the block's Ruby code left in the
// interpreter's slots, and in the C methods it called, is then gone; only
// its value comes back. Lets Fathom's Ruby code prepare a snapshot (check
// options, list its own objects, pick the objects to explain) without
// leaving its temporaries where the walk's conservative scan would find
// them (lib/fathom/retention.rb).

}  // namespace fathom
