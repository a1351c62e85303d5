#include "native/native_stack_resolver.h"

#include <utility>

namespace fathom {

NativeStackResolver::NativeStackResolver(uintptr_t vm_pc) {
  symbolizer_.Refresh();
  vm_object_path_ = symbolizer_.ObjectPathOf(vm_pc);
}

const NativeStackResolver::Resolved& NativeStackResolver::Frame(uintptr_t pc) {
  auto it = cache_.find(pc);
  if (it != cache_.end()) return it->second;
  Resolved r;
  r.frame = symbolizer_.Symbolize(pc);
  bool in_vm = !vm_object_path_.empty() && r.frame.object_path == vm_object_path_;
  r.kind = ClassifyNativeFrame(in_vm, r.frame.function);
  return cache_.emplace(pc, std::move(r)).first->second;
}

std::vector<WovenFrame> NativeStackResolver::Weave(const std::vector<bool>& ruby_is_cfunc, const uintptr_t* pcs,
                                                   size_t n) {
  // The weaver takes both stacks outermost first.
  std::vector<NativeFrameKind> kinds(n);
  for (size_t i = 0; i < n; ++i) kinds[n - 1 - i] = Frame(pcs[i]).kind;
  bool complete = n > 0 && IsThreadRootFrame(Frame(pcs[n - 1]).frame.function);
  std::vector<WovenFrame> woven = WeaveStack(ruby_is_cfunc, kinds, complete);
  for (WovenFrame& w : woven) {
    if (w.native) w.index = static_cast<uint32_t>(n - 1 - w.index);  // back to capture order
  }
  return woven;
}

}  // namespace fathom
