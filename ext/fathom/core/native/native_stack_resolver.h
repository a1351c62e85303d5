// The seam between a sampler and the C-frame machinery, for use off the
// signal path (at flush): symbolizes captured PCs once each (cached by PC)
// and weaves them into a sample's Ruby frames.
//
//   signal handler:  n = CaptureNativePcs(pcs, kMaxNativeFrames, ucontext);
//                    (plus the Ruby frames, and which of them are cfuncs)
//   flush:           NativeStackResolver r(vm_pc);   // one per flush or kept
//                    for each sample: r.Weave(ruby_is_cfunc, pcs, n)
//                    -> WovenFrames; r.Frame(pcs[i]) names a native one.
//
// Not thread-safe (one per flushing thread); allocates.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

#include "native_symbols/native_symbolizer.h"
#include "native/stack_weaver.h"

namespace fathom {

// Enough for the deepest stacks seen in Rails apps' C extensions; a
// deeper stack loses its outermost native frames (the weaver pairs from the
// innermost end, so those only lose the outer cfuncs' native frames).
constexpr size_t kMaxNativeFrames = 128;

class NativeStackResolver {
 public:
  // `vm_pc`: the address of any function of the VM (e.g. &rb_hash_aref):
  // the object holding it (libruby, or the ruby executable when Ruby is
  // linked statically) is the VM's for ClassifyNativeFrame.
  explicit NativeStackResolver(uintptr_t vm_pc);

  struct Resolved {
    NativeFrame frame;
    NativeFrameKind kind;
  };
  // The symbolized frame of one captured PC (cached).
  const Resolved& Frame(uintptr_t pc);

  // Weaves one sample: `ruby_is_cfunc` outermost first, `pcs` innermost
  // first as captured. Woven native indexes are indexes into `pcs`.
  std::vector<WovenFrame> Weave(const std::vector<bool>& ruby_is_cfunc, const uintptr_t* pcs, size_t n);

  const std::string& vm_object_path() const { return vm_object_path_; }

 private:
  NativeSymbolizer symbolizer_;
  std::string vm_object_path_;
  std::unordered_map<uintptr_t, Resolved> cache_;
};

}  // namespace fathom
