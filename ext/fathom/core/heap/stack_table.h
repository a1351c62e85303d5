// StackTable: interns call stacks captured in allocation hooks.
//
// A stack arrives as the raw output of a frame walk: an array of opaque
// frame handles (Ruby passes iseq / method-entry VALUEs) and the line
// executing in each frame, leaf first. Interning it must not touch Ruby, so
// the table stores only integers; names are attached later (SetSymbol) by the
// layer that can ask Ruby for them, and cached per frame.
//
// Two reference counts make the table a "mark table":
//  - a stack is referenced by the samples that point at it; when the last
//    one goes, the stack is dropped;
//  - a frame is referenced by the stacks that contain it (once per
//    occurrence); when the last goes, the frame is dropped.
// The Ruby layer marks exactly the live frame handles once per GC
// (ForEachFrameHandle), however many samples share them — marking per sample
// is an order of magnitude slower on big profiles.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "heap/object_map.h"

namespace fathom {

struct FrameSymbol {
  std::string name;      // e.g. "Foo::Bar#baz", "block in Foo#baz", "<main>"
  std::string filename;  // source path, "" for C functions
  int64_t first_line = 0;
  bool resolved = false;
  bool native = false;  // a C function found by native unwinding (filename: its object)
};

class StackTable {
 public:
  static constexpr uint32_t kNone = UINT32_MAX;

  // Interns a stack and takes one reference to it. `truncated` marks stacks
  // cut at the maximum depth (a marker frame is added when encoding).
  // Allocates only C++ memory; never calls Ruby.
  uint32_t Intern(const uint64_t* handles, const int32_t* lines, size_t depth, bool truncated);
  void Retain(uint32_t stack_id);
  void Release(uint32_t stack_id);

  size_t stack_count() const { return live_stacks_; }
  size_t frame_count() const { return frame_index_.size(); }

  // Stack contents, leaf first: frame indices (stable for the frame's
  // lifetime, unlike handles, which move with GC compaction) and lines.
  const std::vector<uint32_t>& frames(uint32_t stack_id) const { return stacks_[stack_id].frames; }
  const std::vector<int32_t>& lines(uint32_t stack_id) const { return stacks_[stack_id].lines; }
  bool truncated(uint32_t stack_id) const { return stacks_[stack_id].truncated; }

  uint64_t frame_handle(uint32_t frame_index) const { return frames_[frame_index].handle; }
  const FrameSymbol& symbol(uint32_t frame_index) const { return frames_[frame_index].symbol; }
  void SetSymbol(uint32_t frame_index, FrameSymbol symbol) { frames_[frame_index].symbol = std::move(symbol); }

  template <typename F>
  void ForEachFrameHandle(F&& f) const {
    for (const Frame& fr : frames_)
      if (fr.refcount > 0) f(fr.handle);
  }

  // After GC compaction: replaces each frame handle h by remap(h) and
  // rebuilds the indexes, which are keyed by handle.
  template <typename F>
  void RemapFrameHandles(F&& remap) {
    for (Frame& fr : frames_)
      if (fr.refcount > 0) fr.handle = remap(fr.handle);
    RebuildIndexes();
  }

  void Clear();

 private:
  struct Frame {
    uint64_t handle = 0;
    uint32_t refcount = 0;
    FrameSymbol symbol;
  };
  struct Stack {
    std::vector<uint32_t> frames;
    std::vector<int32_t> lines;
    uint64_t hash = 0;
    uint32_t refcount = 0;
    uint32_t next_in_bucket = kNone;  // chain of stacks sharing a hash bucket
    bool truncated = false;
  };

  uint64_t HashStack(const uint64_t* handles, const int32_t* lines, size_t depth, bool truncated) const;
  bool Matches(const Stack& s, const uint64_t* handles, const int32_t* lines, size_t depth, bool truncated) const;
  uint32_t AcquireFrame(uint64_t handle);
  void ReleaseFrame(uint32_t frame_index);
  void LinkIntoBucket(uint32_t stack_id);
  void UnlinkFromBucket(uint32_t stack_id);
  void RebuildIndexes();

  std::vector<Frame> frames_;
  std::vector<uint32_t> free_frames_;
  ObjectMap frame_index_;  // handle -> frame index

  std::vector<Stack> stacks_;
  std::vector<uint32_t> free_stacks_;
  size_t live_stacks_ = 0;
  // Hash buckets (power-of-two sized) holding the head of a chain of stack ids.
  std::vector<uint32_t> buckets_ = std::vector<uint32_t>(1024, kNone);
};

}  // namespace fathom
