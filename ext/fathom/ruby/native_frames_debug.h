// Fathom::Native.debug_* : internal methods to look at the C-frame
// machinery (core/native/) from Ruby, for tests and bench/native_capture.rb.
// Not a user API: the CPU sampler wires the same pieces into its own
// handler and flush (IMPLEMENTATION.md, "C frames").
#pragma once

#include <ruby.h>

namespace fathom {

void InitNativeFramesDebug(VALUE mNative);

}  // namespace fathom
