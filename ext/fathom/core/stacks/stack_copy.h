// StackCopier: stacks copied out of a StackTable for an encoder that runs
// without the GVL, while the table goes on changing: each frame becomes a
// StackFrame whose symbol indexes the copier's own table of FrameSymbols,
// which holds each frame's symbol once however many stacks share it.
//
// Every frame of a copied stack must have been symbolized
// (FrameSymbol::resolved). Nothing is kept pointing into the table between
// calls, so the table may grow in between (other threads' hooks intern
// while a flush yields), as long as the copied stacks stay referenced.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "stacks/frames.h"
#include "stacks/stack_table.h"

namespace fathom {

class StackCopier {
 public:
  explicit StackCopier(const StackTable& table) : table_(table) {}

  // The stack's frames, leaf first.
  std::vector<StackFrame> Copy(uint32_t stack_id);
  // The symbols the copied frames index, each frame's once, in first-copied order.
  std::vector<FrameSymbol> TakeSymbols() { return std::move(symbols_); }

 private:
  const StackTable& table_;
  std::unordered_map<uint32_t, uint32_t> symbol_of_frame_;  // frame index -> index in symbols_
  std::vector<FrameSymbol> symbols_;
};

}  // namespace fathom
