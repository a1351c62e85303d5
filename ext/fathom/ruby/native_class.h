// What every native class of the binding writes the same way, written once:
// the rb_data_type_t of the C++ struct behind its objects, getting that
// struct back from an object, allocating it, and defining its methods with
// the arity their C++ signature says.
//
//   const rb_data_type_t kType = DataType("Fathom::Native::CpuCollector", Mark, Free, Size, Compact);
//   CpuCollector* c = Unwrap<CpuCollector>(self, kType);  // TypeError for a wrong receiver
//   rb_define_alloc_func(klass, Allocate<CpuCollector, &kType>);
//   DefineMethods(klass, {{"start", Method(CollectorStart)}, {"flush", Method(CollectorFlush)}});
#pragma once

#include <ruby.h>

#include <cstddef>
#include <initializer_list>

#include "ruby/runtime/boundary.h"

namespace fathom {

// Objects freed at once by the GC (RUBY_TYPED_FREE_IMMEDIATELY). mark and
// compact may be null for a struct that holds no Ruby object.
constexpr rb_data_type_t DataType(const char* name, void (*mark)(void*), void (*free)(void*),
                                  size_t (*size)(const void*), void (*compact)(void*) = nullptr) {
  return rb_data_type_t{name, {mark, free, size, compact, {nullptr}}, nullptr, nullptr, RUBY_TYPED_FREE_IMMEDIATELY};
}

// The struct behind self. Raises TypeError (a longjmp) for a wrong receiver:
// call it before any C++ object is alive in the method body.
template <typename T>
T* Unwrap(VALUE self, const rb_data_type_t& type) {
  return static_cast<T*>(rb_check_typeddata(self, &type));
}

// The allocator of a class whose objects hold a new T (rb_define_alloc_func).
template <typename T, const rb_data_type_t* Type>
VALUE Allocate(VALUE klass) {
  return RubyMethod([klass] { return TypedData_Wrap_Struct(klass, Type, new T()); });
}

// A method body with its arity, from its signature: VALUE f(VALUE self,
// VALUE a, ...) takes as many arguments as it has after self; VALUE f(int
// argc, VALUE* argv, VALUE self) any number (-1).
struct MethodBody {
  VALUE (*function)(ANYARGS);
  int arity;
};

template <typename... Args>
MethodBody Method(VALUE (*f)(VALUE, Args...)) {
  return MethodBody{RUBY_METHOD_FUNC(f), static_cast<int>(sizeof...(Args))};
}
inline MethodBody Method(VALUE (*f)(int, VALUE*, VALUE)) { return MethodBody{RUBY_METHOD_FUNC(f), -1}; }

struct MethodDef {
  const char* name;
  MethodBody body;
};

// Instance methods of klass. (The functions in parentheses: Ruby's C++
// headers make rb_define_method a macro that wants its arity as a constant.)
inline void DefineMethods(VALUE klass, std::initializer_list<MethodDef> methods) {
  for (const MethodDef& m : methods) (rb_define_method)(klass, m.name, m.body.function, m.body.arity);
}

// Module functions of module.
inline void DefineModuleFunctions(VALUE module, std::initializer_list<MethodDef> functions) {
  for (const MethodDef& f : functions) (rb_define_module_function)(module, f.name, f.body.function, f.body.arity);
}

}  // namespace fathom
