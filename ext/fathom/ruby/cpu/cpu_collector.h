// Defines Fathom::Native::CpuCollector (see cpu_collector.cc).
#pragma once

#include <ruby.h>

namespace fathom {

void InitCpuCollector(VALUE mNative);

}  // namespace fathom
