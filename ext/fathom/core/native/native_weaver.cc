#include "native/native_weaver.h"

namespace fathom {

void NativeWeaver::Weave(const std::vector<uintptr_t>& pcs, std::vector<uint32_t>* row_frames,
                         std::vector<int32_t>* row_lines, std::vector<FrameSymbol>* symbols) {
  if (pcs.empty() || row_frames->empty()) return;
  // Rows are leaf first; the weaver wants outermost first.
  size_t n = row_frames->size();
  std::vector<bool> is_cfunc(n);
  for (size_t i = 0; i < n; i++) {
    const std::string& file = (*symbols)[(*row_frames)[i]].filename;
    is_cfunc[n - 1 - i] = file.empty() || file == "<cfunc>";
  }
  std::vector<WovenFrame> woven = resolver_.Weave(is_cfunc, pcs.data(), pcs.size());
  std::vector<uint32_t> frames;
  std::vector<int32_t> lines;
  frames.reserve(woven.size());
  lines.reserve(woven.size());
  for (auto it = woven.rbegin(); it != woven.rend(); ++it) {  // back to leaf first
    if (!it->native) {
      size_t leaf_index = n - 1 - it->index;
      frames.push_back((*row_frames)[leaf_index]);
      lines.push_back(leaf_index < row_lines->size() ? (*row_lines)[leaf_index] : 0);
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
    frames.push_back(found->second);
    lines.push_back(0);
  }
  *row_frames = std::move(frames);
  *row_lines = std::move(lines);
}

}  // namespace fathom
