// Frames as profiles show them, shared by every profile that has stacks
// (heap, CPU/wall, and the C frames woven into CPU stacks): a frame's
// symbol (its name, file and first line, looked up once per frame by the
// layer that can ask Ruby or read ELF symbols), a frame of a detached stack
// (an index into a table of such symbols, and the line it was at), and the
// marker frame of a stack cut at the maximum depth.
#pragma once

#include <cstdint>
#include <string>

namespace fathom {

struct FrameSymbol {
  std::string name;      // e.g. "Foo::Bar#baz", "block in Foo#baz", "<main>"
  std::string filename;  // source path, "" for C functions
  int64_t first_line = 0;
  bool resolved = false;
  bool native = false;  // a C function found by native unwinding (filename: its object)
};

// A frame of a stack copied out of the stack table for encoding
// (stack_copy.h): its symbol, an index into the copy's own table of
// FrameSymbols, and the line it was at. Stacks of them are leaf first.
struct StackFrame {
  uint32_t symbol;
  int32_t line;
};

// The name of the frame added at the root of stacks cut at the maximum depth.
inline constexpr const char* kTruncatedFrameName = "(truncated)";

}  // namespace fathom
