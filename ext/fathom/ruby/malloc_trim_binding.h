// Fathom::Native.malloc_trim: glibc's malloc_trim(0) with the GVL released.
#pragma once

#include <ruby.h>

namespace fathom {

void InitMallocTrim(VALUE mNative);

}  // namespace fathom
