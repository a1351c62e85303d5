#include "native/native_weaver.h"

namespace fathom {

void NativeWeaver::Weave(const std::vector<uintptr_t>& pcs, std::vector<StackFrame>* stack,
                         std::vector<FrameSymbol>* symbols) {
  if (pcs.empty() || stack->empty()) return;
  // Stacks are leaf first; the weaver wants outermost first.
  size_t n = stack->size();
  std::vector<bool> is_cfunc(n);
  for (size_t i = 0; i < n; i++) {
    const std::string& file = (*symbols)[(*stack)[i].symbol].filename;
    is_cfunc[n - 1 - i] = file.empty() || file == "<cfunc>";
  }
  std::vector<WovenFrame> woven = resolver_.Weave(is_cfunc, pcs.data(), pcs.size());
  std::vector<StackFrame> out;
  out.reserve(woven.size());
  for (auto it = woven.rbegin(); it != woven.rend(); ++it) {  // back to leaf first
    if (!it->native) {
      out.push_back((*stack)[n - 1 - it->index]);
      continue;
    }
    const NativeFrame& f = resolver_.Frame(pcs[it->index]).frame;
    auto key = std::make_pair(f.DisplayName(), f.object);
    auto found = symbols_.find(key);
    if (found == symbols_.end()) {
      FrameSymbol sym;
      sym.name = key.first;
      sym.filename = key.second;
      sym.resolved = true;
      sym.native = true;
      found = symbols_.emplace(key, static_cast<uint32_t>(symbols->size())).first;
      symbols->push_back(std::move(sym));
    }
    out.push_back(StackFrame{found->second, 0});
  }
  *stack = std::move(out);
}

}  // namespace fathom
