// Defines Fathom::Native::HeapSnapshot (see heap_snapshot.cc).
#pragma once

#include <ruby.h>

namespace fathom {

void InitHeapSnapshot(VALUE mNative, VALUE eError);

}  // namespace fathom
