// NativeWeaver: puts a sample's C frames under the Ruby frames that called
// them (native/stack_weaver.h) in a profile's own tables: a Ruby frame is
// an index into `symbols`, a cfunc is a Ruby frame without a source path
// ("" or "<cfunc>"). Native frames become symbols named "deflate" (or
// "<libz.so.1>" for an unnamed function) with the object as file name, one
// per distinct name and object, added to `symbols` as they are first seen.
// Used by the CPU profiler's flush (ruby/cpu/cpu_window.cc); plain C++.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "stacks/frames.h"
#include "native/native_stack_resolver.h"

namespace fathom {

class NativeWeaver {
 public:
  // vm_pc: as for NativeStackResolver (the address of a function of the VM).
  explicit NativeWeaver(uintptr_t vm_pc) : resolver_(vm_pc) {}

  // Weaves the C frames `pcs` (innermost first, as captured) into one Ruby
  // stack (leaf first, its frames indexing `symbols`). No-op when either
  // is empty.
  void Weave(const std::vector<uintptr_t>& pcs, std::vector<StackFrame>* stack, std::vector<FrameSymbol>* symbols);

 private:
  NativeStackResolver resolver_;
  std::map<std::pair<std::string, std::string>, uint32_t> symbols_;  // (name, object) -> index in symbols
};

}  // namespace fathom
