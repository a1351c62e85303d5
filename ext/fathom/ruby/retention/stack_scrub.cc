#include "ruby/retention/stack_scrub.h"

#include <ruby.h>

#include <cstring>

#include "ruby/init.h"
#include "ruby/runtime/boundary.h"

namespace fathom {
namespace {

constexpr size_t kChunkBytes = 4096;
// Deeper than any chain Fathom runs between handling an object and the
// walk's scan (the pick's token lookups through rb_funcall, a GC's mark
// loop: a few KiB each).
constexpr int kChunks = 16;

// One chunk per frame, so that each level asks Ruby again how much stack
// is left before it goes deeper. explicit_bzero is never optimized away;
// the asm keeps the frame alive past the recursive call (no tail call).
__attribute__((noinline)) void ScrubChunks(int left) {
  unsigned char chunk[kChunkBytes];
  explicit_bzero(chunk, sizeof chunk);
  // ruby_stack_check: true when the stack is within Ruby's margin (2048
  // words) of its end.
  if (left > 1 && !ruby_stack_check()) ScrubChunks(left - 1);
  __asm__ volatile("" : : "r"(chunk) : "memory");
}

}  // namespace

void ScrubMachineStackBelow() {
  if (!ruby_stack_check()) ScrubChunks(kChunks);
}

namespace {

// A raise in the block leaves through Protect and RubyMethod, unscrubbed:
// no snapshot follows then.
VALUE WithStackScrubbed(VALUE) {
  return RubyMethod([] {
    VALUE value = Qnil;
    Protect([&value] { value = rb_yield(Qnil); });
    ScrubMachineStackBelow();
    return value;
  });
}

}  // namespace

void InitStackScrub(VALUE mNative) {
  rb_define_module_function(mNative, "with_stack_scrubbed", RUBY_METHOD_FUNC(WithStackScrubbed), 0);
}

}  // namespace fathom
