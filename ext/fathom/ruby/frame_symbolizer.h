// Turns a frame handle from rb_profile_frames (an iseq or, for C functions,
// a method entry) into the names a Ruby developer reads: "Foo::Bar#baz",
// "block in Foo#baz", "<main>", "Integer#times". Allocates Ruby strings, so
// it runs only at flush with the GVL, never in a hook.
#pragma once

#include <ruby.h>

#include "heap/stack_table.h"

namespace fathom {

FrameSymbol SymbolizeFrame(VALUE frame);

}  // namespace fathom
