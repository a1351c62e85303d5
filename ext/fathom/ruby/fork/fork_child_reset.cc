// See fork_child_reset.h.
#include "ruby/fork/fork_child_reset.h"

#include <cstddef>
#include <cstdio>
#include <cstdlib>

#include "ruby/runtime/boundary.h"

namespace fathom {
namespace {

// Three are registered (forked_dump.cc, retention_snapshot.cc,
// heap_flush.cc); a ninth is a programming error, caught by any test run.
constexpr size_t kMaxResets = 8;
ForkChildReset g_resets[kMaxResets];
size_t g_reset_count = 0;

// Native.after_fork_child: in a forked child, before anything else of
// Fathom's runs there.
VALUE AfterForkChild(VALUE) {
  return RubyMethod([] {
    for (size_t i = 0; i < g_reset_count; i++) g_resets[i]();
    return Qnil;
  });
}

}  // namespace

void ResetInForkedChild(ForkChildReset reset) {
  if (g_reset_count == kMaxResets) {
    fprintf(stderr, "fathom: too many fork-child resets registered (raise kMaxResets)\n");
    abort();
  }
  g_resets[g_reset_count++] = reset;
}

void InitForkChildReset(VALUE mNative) {
  rb_define_module_function(mNative, "after_fork_child", RUBY_METHOD_FUNC(AfterForkChild), 0);
}

}  // namespace fathom
