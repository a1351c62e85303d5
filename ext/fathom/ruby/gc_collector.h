// Defines Fathom::Native::GcCollector (see gc_collector.cc).
#pragma once

#include <ruby.h>

namespace fathom {

void InitGcCollector(VALUE mNative);

}  // namespace fathom
