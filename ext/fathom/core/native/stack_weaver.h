// Puts the native frames of one sample into its Ruby stack, at the cfunc
// frames that called them, without any private VM structure.
//
// The heuristic (docs/internals/native.md, "C frames", says where it fails):
//
// 1. The interpreter's entry point, rb_vm_exec (exported by libruby for
//    MJIT on 3.1; vm_exec/vm_exec_core where symbols are complete), appears
//    in the native stack once per *entry into the VM*: the program's main
//    script, and each time C code calls back into Ruby code (rb_yield,
//    rb_funcall of a Ruby method, require). Calls from Ruby to Ruby stay in
//    the same interpreter loop; calls from Ruby to a cfunc are plain C calls
//    out of it.
// 2. The Ruby stack has the same structure: a new VM entry exactly where a
//    cfunc frame is followed by a Ruby (iseq) frame. Cutting it there gives
//    "groups", one per VM entry.
// 3. The native frames after the i-th VM entry (up to the next) are what the
//    code of group i called out to: they go under the last frame of group i
//    (a cfunc, or for the innermost group whatever frame is running, so that
//    a VM function the Ruby stack hides, rb_hash_aref under an opt_aref,
//    shows under the Ruby method). The VM's own call machinery at the start
//    of each segment (vm_call_cfunc_with_frame, vm_sendish, static functions
//    of libruby that a stripped libruby leaves unnamed) is dropped.
// 4. Groups and segments are paired from the innermost end, so a native
//    stack cut at its maximum depth (or at code without unwind information,
//    such as JIT code) still gets its inner frames (those a profile is
//    about) right. A complete native stack whose segment count differs from
//    the group count had a VM entry the Ruby stack does not show (a trap
//    handler, a TracePoint block): only the innermost pair is woven then.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace fathom {

enum class NativeFrameKind : uint8_t {
  kOther,        // an extension's, a library's, or a named VM function
  kVmInternal,   // the VM's call machinery (dropped at a segment's start)
  kVmEntry,      // the interpreter loop: rb_vm_exec, vm_exec, vm_exec_core
  // A public function of the VM that calls Ruby code (rb_yield, rb_funcallv,
  // rb_ensure...): like kOther, except where no entry is found (see
  // WeaveStack): there it shows that the sample is in Ruby code called back
  // from C, and that the frames around it belong to an outer cfunc.
  kCallsRuby,
};

// Classifies a symbolized frame. `in_vm_object`: the frame's object is the
// one holding the VM (libruby, or the ruby executable when linked
// statically). `function`: its demangled name, "" when unknown.
NativeFrameKind ClassifyNativeFrame(bool in_vm_object, const std::string& function);

struct WovenFrame {
  bool native;     // true: index into the native frames; false: Ruby frames
  uint32_t index;
};

// Weaves one sample. `ruby_is_cfunc` and `native_kinds` are both listed
// OUTERMOST first (native PCs are captured innermost first: reverse them).
// Returns every Ruby frame, in order, with native frames inserted after the
// Ruby frames they belong under, outermost first. Native frames that cannot
// be placed (before the first VM entry: main(), ruby_run_node) are left out.
// `native_complete`: the capture reached the thread's first frame (see
// IsThreadRootFrame) rather than stopping at the depth limit or at code
// without unwind information.
std::vector<WovenFrame> WeaveStack(const std::vector<bool>& ruby_is_cfunc,
                                   const std::vector<NativeFrameKind>& native_kinds, bool native_complete);

// Whether `function` is where a thread's native stack begins (_start for
// the main thread, clone3/clone for the others, as glibc 2.34+ names them).
bool IsThreadRootFrame(const std::string& function);

}  // namespace fathom
