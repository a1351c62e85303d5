// Holds Ruby's GC off for a scope: for code that hands out objects it knows
// only by address (the exact heap profiler's records), where an object must
// stay valid from the moment it is read until it sits in a Ruby array.
//
// Without it that failed twice over (Ruby 3.3 died in
// HeapProfiler#live_objects with "[BUG] try to mark T_NONE object"):
//   - a GC that allocation starts in the middle frees an unreachable object
//     whose address was already read (FREEOBJ retires its record, not the
//     copy);
//   - during a lazy sweep, an object the last marking did not reach is dead
//     but not yet freed: handed out, it is freed later all the same, and
//     the array then holds a freed slot.
// rb_gc_disable first finishes a GC in progress (gc_rest, on 3.1 to 3.4:
// its sweep frees every unreached object, FREEOBJ retires their records),
// then nothing is freed until the scope ends. So every record still in the
// store is an object that is alive (reached by the last marking, or
// allocated since) and stays so. A GC.disable of the caller's stays.
//
// The destructor runs on C++ unwinding only: the Ruby calls inside the
// scope go through Protect (ruby/runtime/boundary.h), so that a Ruby
// exception unwinds as a RubyJump and the GC is on again before it is
// raised.
#pragma once
#include <ruby.h>

namespace fathom {

class GcPause {
 public:
  explicit GcPause(bool pause = true) : paused_here_(pause && !RTEST(rb_gc_disable())) {}
  ~GcPause() {
    if (paused_here_) rb_gc_enable();
  }
  GcPause(const GcPause&) = delete;
  GcPause& operator=(const GcPause&) = delete;

 private:
  bool paused_here_;
};

}  // namespace fathom
