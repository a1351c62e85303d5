#include "stacks/stack_copy.h"

namespace fathom {

std::vector<StackFrame> StackCopier::Copy(uint32_t stack_id) {
  const std::vector<uint32_t>& frames = table_.frames(stack_id);
  const std::vector<int32_t>& lines = table_.lines(stack_id);
  std::vector<StackFrame> out(frames.size());
  for (size_t i = 0; i < frames.size(); i++) {
    auto [it, fresh] = symbol_of_frame_.try_emplace(frames[i], static_cast<uint32_t>(symbols_.size()));
    if (fresh) symbols_.push_back(table_.symbol(frames[i]));
    out[i] = StackFrame{it->second, lines[i]};
  }
  return out;
}

}  // namespace fathom
