#pragma once
#include <ruby.h>

namespace fathom {
// Fathom::Native.analyze_dump / diff_dumps (core/dump/dump_analysis.h).
void InitDumpAnalysis(VALUE mNative);
}  // namespace fathom
