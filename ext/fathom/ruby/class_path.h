// A class's name without allocating a Ruby object, for code that runs with
// GC disabled (the retention walk) or must not leave garbage behind (the
// flush's census rows). rb_class_path makes a String per call;
// rb_class_path_cached returns the class's own path String, or nil for an
// anonymous class, which is then named as rb_class_path would name it:
// "#<Class:0x...>".
#pragma once

#include <ruby.h>

#include <string>

namespace fathom {

// klass: a class as rb_obj_class returns it (not a singleton or iclass).
std::string ClassPathWithoutAllocating(VALUE klass);

}  // namespace fathom
