#include "stacks/pprof_locations.h"

namespace fathom {

PprofLocations::PprofLocations(PprofBuilder& builder, const std::vector<FrameSymbol>* symbols)
    : builder_(builder), symbols_(symbols), functions_(symbols ? symbols->size() : 0, 0) {}

void PprofLocations::Append(const std::vector<StackFrame>& stack, bool truncated, std::vector<uint64_t>* out) {
  for (const StackFrame& f : stack) {
    if (f.symbol >= functions_.size()) continue;
    uint64_t& function = functions_[f.symbol];
    if (function == 0) {
      const FrameSymbol& sym = (*symbols_)[f.symbol];
      function = builder_.intern_function(sym.name, sym.filename, sym.first_line);
    }
    out->push_back(builder_.intern_location(function, f.line));
  }
  if (truncated) out->push_back(Named(kTruncatedFrameName));  // root end: stacks are leaf first
}

uint64_t PprofLocations::Named(std::string_view name) {
  return builder_.intern_location(builder_.intern_function(name, "", 0), 0);
}

}  // namespace fathom
