// The names profiles give to Ruby things, read with the GVL:
//
// SymbolizeFrame turns a frame handle from rb_profile_frames (an iseq or,
// for C functions, a method entry) into the names a Ruby developer reads:
// "Foo::Bar#baz", "block in Foo#baz", "<main>", "Integer#times". Allocates
// Ruby strings, so it runs only at flush with the GVL, never in a hook.
//
// ClassPathWithoutAllocating: a class's name without allocating a Ruby
// object, for code that runs with GC disabled (the retention walk) or must
// not leave garbage behind (the flush's census rows). rb_class_path makes a
// String per call; rb_class_path_cached returns the class's own path
// String, or nil for an anonymous class, which is then named as
// rb_class_path would name it: "#<Class:0x...>".
#pragma once

#include <ruby.h>

#include <string>

#include "stacks/frames.h"

namespace fathom {

FrameSymbol SymbolizeFrame(VALUE frame);

// klass: a class as rb_obj_class returns it (not a singleton or iclass).
std::string ClassPathWithoutAllocating(VALUE klass);

}  // namespace fathom
