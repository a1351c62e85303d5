// PprofLocations: stacks written as pprof Locations, the one place where an
// encoder turns frames into location ids (as Go's runtime/pprof has one
// appendLocsForStack for every profile). The heap and CPU/wall encoders
// give it their stacks of StackFrames; the GC and retention encoders, whose
// frames are only names, their names.
//
// Each distinct symbol becomes one pprof Function (name, file, first line)
// and each (function, line) one Location, both interned by the
// PprofBuilder, which numbers them in first-use order: so the ids depend
// on the order in which an encoder hands its stacks over, and each encoder
// keeps its own (the bytes of a profile are part of its contract).
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "encode/pprof_builder.h"
#include "stacks/frames.h"

namespace fathom {

class PprofLocations {
 public:
  // symbols: the table the StackFrames' symbol fields index (may be null
  // for an encoder that only has names).
  explicit PprofLocations(PprofBuilder& builder, const std::vector<FrameSymbol>* symbols = nullptr);

  // Appends the locations of a stack (leaf first, as pprof wants) to out:
  // one per frame, then, when the stack was cut at the maximum depth, the
  // kTruncatedFrameName marker at its root end. A frame whose symbol is not
  // in the table is left out.
  void Append(const std::vector<StackFrame>& stack, bool truncated, std::vector<uint64_t>* out);

  // The location of a frame that is only a name: no file, line 0
  // ("Garbage Collection", a retention path, a marker).
  uint64_t Named(std::string_view name);

 private:
  PprofBuilder& builder_;
  const std::vector<FrameSymbol>* symbols_;
  std::vector<uint64_t> functions_;  // Function id per symbol, 0 until first used
};

}  // namespace fathom
