// Fathom::Native.write_new_file: core/io/new_file.h with the GVL released.
#pragma once

#include <ruby.h>

namespace fathom {

void InitNewFile(VALUE mNative);

}  // namespace fathom
