// Keywords: a native constructor's options, passed by name.
//
// lib/ validates every option once, in Fathom::Options (lib/fathom/options.rb,
// where each limit is defined: the 10us minimum interval, the 4096-frame
// depth), and passes them to the native class all at once, by keyword:
//
//   Native::CpuCollector.new(mode: :cpu, interval_ns: 10_000_000, max_depth: 128, timeline: false, native: false)
//
// This reads them back by name: each expected keyword must be there, no
// other may be, and each is of its type, or a Ruby exception names it.
// Beyond the type it checks only what the binding's own memory needs (a
// depth of at least one frame), not the options' limits, which are lib's.
// Use inside RubyMethod (boundary.h): it throws, never raises.
#pragma once

#include <ruby.h>

#include <cstdint>
#include <initializer_list>

namespace fathom {

class Keywords {
 public:
  // argc/argv: a method's arguments (rb_define_method arity -1), which must
  // be one Hash of Symbol keys; `names`: every keyword it takes, all required.
  // `where` names the method in messages ("Fathom::Native::CpuCollector.new").
  Keywords(int argc, const VALUE* argv, std::initializer_list<const char*> names, const char* where);

  VALUE Get(const char* name) const;
  // An Integer at least `min` that fits in an int64_t.
  int64_t Integer(const char* name, int64_t min) const;
  // true or false.
  bool Boolean(const char* name) const;
  // A Symbol, given back as its name.
  const char* SymbolName(const char* name) const;

 private:
  VALUE hash_;
  const char* where_;
};

}  // namespace fathom
