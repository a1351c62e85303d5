#include "native/stack_weaver.h"

#include <algorithm>
#include <cstring>
#include <utility>

namespace fathom {

namespace {

bool StartsWith(const std::string& s, const char* prefix) { return s.compare(0, strlen(prefix), prefix) == 0; }

}  // namespace

NativeFrameKind ClassifyNativeFrame(bool in_vm_object, const std::string& function) {
  if (!in_vm_object) return NativeFrameKind::kOther;
  // vm_exec_core is the instruction loop; rb_vm_exec/vm_exec wrap it (3.1
  // exports rb_vm_exec, and inlines vm_exec_core into it).
  if (function == "rb_vm_exec" || function == "vm_exec" || function == "vm_exec_core") return NativeFrameKind::kVmEntry;
  // Unnamed code of libruby is a static function of a stripped build;
  // between the loop and a cfunc that is the call machinery. With full
  // symbols the machinery is named vm_* (vm_sendish, vm_call_cfunc...).
  if (function.empty() || StartsWith(function, "vm_") || StartsWith(function, "rb_vm_")) {
    return NativeFrameKind::kVmInternal;
  }
  static const char* const kCallsRuby[] = {"rb_yield", "rb_funcall", "rb_call_super", "rb_block_call", "rb_proc_call",
                                          "rb_ensure", "rb_protect", "rb_rescue", "rb_catch", "rb_iterate",
                                          "rb_eval", "rb_obj_call_init", "rb_class_new_instance", "rb_require",
                                          "rb_method_call", "rb_exec_recursive"};
  for (const char* prefix : kCallsRuby) {
    if (StartsWith(function, prefix)) return NativeFrameKind::kCallsRuby;
  }
  return NativeFrameKind::kOther;
}

bool IsThreadRootFrame(const std::string& function) {
  return function == "_start" || function == "clone3" || function == "clone" || function == "__clone" ||
         function == "__clone3";
}

std::vector<WovenFrame> WeaveStack(const std::vector<bool>& ruby_is_cfunc,
                                   const std::vector<NativeFrameKind>& native_kinds, bool native_complete) {
  // Ruby groups: the index of each group's last frame.
  std::vector<size_t> group_last;
  for (size_t i = 0; i < ruby_is_cfunc.size(); ++i) {
    bool ends_group = i + 1 == ruby_is_cfunc.size() || (ruby_is_cfunc[i] && !ruby_is_cfunc[i + 1]);
    if (ends_group) group_last.push_back(i);
  }

  // Native segments: the frames between one VM entry and the next (or the
  // innermost frame). Frames before the first entry (main, ruby_run_node)
  // belong to no Ruby frame.
  struct Segment {
    size_t begin, end;
  };
  std::vector<Segment> segments;
  for (size_t i = 0; i < native_kinds.size(); ++i) {
    if (native_kinds[i] == NativeFrameKind::kVmEntry) {
      segments.push_back(Segment{i + 1, i + 1});
    } else if (!segments.empty()) {
      segments.back().end = i + 1;
    }
  }
  if (segments.empty() && !ruby_is_cfunc.empty()) {
    // No entry in sight: a stripped libruby that does not export
    // rb_vm_exec (3.3 does not), or a capture stopped by JIT code. Only the
    // innermost segment can be found: from the innermost frame outwards,
    // past the VM's unnamed leaf helpers, up to the first VM frame (the
    // machinery that called the cfunc or the VM function). It goes under
    // the innermost Ruby frame.
    size_t end = native_kinds.size();
    while (end > 0 && native_kinds[end - 1] == NativeFrameKind::kVmInternal) --end;
    size_t begin = end;
    bool calls_ruby = false;
    while (begin > 0 && (native_kinds[begin - 1] == NativeFrameKind::kOther ||
                         native_kinds[begin - 1] == NativeFrameKind::kCallsRuby)) {
      calls_ruby = calls_ruby || native_kinds[begin - 1] == NativeFrameKind::kCallsRuby;
      --begin;
    }
    // Reaching the outermost frame means no VM frame bounds it: not a
    // Ruby thread's stack as we know it; weave nothing. Under a Ruby frame
    // (not a cfunc), a run that calls Ruby (rb_ary_each -> rb_yield) is the
    // outer cfunc's, met while the VM enters or leaves the block: nothing.
    bool innermost_is_cfunc = ruby_is_cfunc.back();
    if (begin > 0 && begin < end && (innermost_is_cfunc || !calls_ruby)) segments.push_back(Segment{begin, end});
  }
  // Trim the VM's machinery: at the start of every segment (the loop calling
  // out to a cfunc), and at the end of all but the innermost (the cfunc's
  // callback path into the next entry: rb_yield's static helpers). The
  // innermost keeps its tail: that is where the sample's time was spent.
  // Two entries with nothing between them are one (rb_vm_exec calling
  // vm_exec_core where both are named): that empty segment goes. A segment
  // that trimming emptied stays: it is a cfunc whose own frames are all
  // the VM's (Integer#times on a stripped libruby: int_dotimes is static).
  std::vector<Segment> kept;
  for (size_t i = 0; i < segments.size(); ++i) {
    Segment s = segments[i];
    bool innermost = i + 1 == segments.size();
    if (s.begin == s.end && !innermost) continue;
    while (s.begin < s.end && native_kinds[s.begin] == NativeFrameKind::kVmInternal) ++s.begin;
    while (!innermost && s.begin < s.end && native_kinds[s.end - 1] == NativeFrameKind::kVmInternal) --s.end;
    kept.push_back(s);
  }
  segments.swap(kept);

  // Pair from the innermost end. Only a group ending in a cfunc, or the
  // innermost group, gets native frames. A complete native stack has one
  // segment per group; when the counts differ anyway, the VM was entered
  // in a way the Ruby stack does not show (a signal trap handler or a
  // TracePoint block run from C, a C block calling back into Ruby) and
  // only the innermost pair is sure.
  size_t pairs = std::min(group_last.size(), segments.size());
  if (native_complete && group_last.size() != segments.size()) pairs = std::min<size_t>(pairs, 1);
  std::vector<std::pair<size_t, Segment>> placed;  // (ruby frame, segment), innermost first
  for (size_t k = 1; k <= pairs; ++k) {
    size_t g = group_last.size() - k, s = segments.size() - k;
    size_t frame = group_last[g];
    bool innermost = k == 1;
    if ((innermost || ruby_is_cfunc[frame]) && segments[s].begin < segments[s].end) {
      placed.emplace_back(frame, segments[s]);
    }
  }

  std::vector<WovenFrame> out;
  out.reserve(ruby_is_cfunc.size() + native_kinds.size());
  size_t next = placed.size();  // placed is innermost first: walk it backwards
  for (size_t i = 0; i < ruby_is_cfunc.size(); ++i) {
    out.push_back(WovenFrame{false, static_cast<uint32_t>(i)});
    if (next > 0 && placed[next - 1].first == i) {
      --next;
      const Segment& seg = placed[next].second;
      for (size_t n = seg.begin; n < seg.end; ++n) out.push_back(WovenFrame{true, static_cast<uint32_t>(n)});
    }
  }
  return out;
}

}  // namespace fathom
