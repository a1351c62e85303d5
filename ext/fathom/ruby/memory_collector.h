// Defines Fathom::Native::MemoryCollector (see memory_collector.cc).
#pragma once

#include <ruby.h>

namespace fathom {

void InitMemoryCollector(VALUE mNative, VALUE eError);

}  // namespace fathom
