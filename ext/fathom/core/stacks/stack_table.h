// StackTable: interns call stacks captured by a sampler (the heap
// profiler's allocation hooks, the CPU/wall profiler's drain).
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
//
// Interning runs in exact mode's NEWOBJ hook for every allocation, and a
// Rails stack is 100-200 frames deep, so its cost per frame matters. A
// full intern hashes every frame (a serial multiply chain, ~5 cycles a
// frame) and compares every frame of the candidate through the frame table.
// In front of it sits a small direct-mapped cache of recently interned
// stacks, keyed by the depth and the innermost frames only (cheap, fixed
// cost), where a hit is *proven* by comparing the whole stack with memcmp
// against the stack's own copy of its handles and lines: a wide, branch-free
// compare that costs a fraction of the hash. Nothing is assumed about the
// outer frames: a stack whose outer frames changed fails the memcmp and
// takes the full path. (docs/internals/heap-lifecycle.md, "Stacks at depth")
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <vector>

#include "base/object_map.h"
#include "stacks/frames.h"

namespace fathom {

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

  // Interns that the recent-stack cache answered (for tests and stats).
  uint64_t cache_hits() const { return cache_hits_; }

 private:
  struct Frame {
    uint64_t handle = 0;
    uint32_t refcount = 0;
    FrameSymbol symbol;
  };
  struct Stack {
    std::vector<uint32_t> frames;
    std::vector<uint64_t> handles;  // frames' handles, in order: the cache's memcmp
    std::vector<int32_t> lines;
    uint64_t hash = 0;
    uint32_t refcount = 0;
    uint32_t next_in_bucket = kNone;  // chain of stacks sharing a hash bucket
    bool truncated = false;
  };

  uint64_t HashStack(const uint64_t* handles, const int32_t* lines, size_t depth, bool truncated) const;
  bool Matches(const Stack& s, const uint64_t* handles, const int32_t* lines, size_t depth, bool truncated) const;
  uint32_t InternUncached(const uint64_t* handles, const int32_t* lines, size_t depth, bool truncated);
  uint32_t AcquireFrame(uint64_t handle);
  void ReleaseFrame(uint32_t frame_index);
  void LinkIntoBucket(uint32_t stack_id);
  void UnlinkFromBucket(uint32_t stack_id);
  void RebuildIndexes();
  static uint32_t CacheSlot(const uint64_t* handles, const int32_t* lines, size_t depth, bool truncated);
  bool SameStack(const Stack& s, const uint64_t* handles, const int32_t* lines, size_t depth, bool truncated) const;

  std::vector<Frame> frames_;
  std::vector<uint32_t> free_frames_;
  ObjectMap frame_index_;  // handle -> frame index

  std::vector<Stack> stacks_;
  std::vector<uint32_t> free_stacks_;
  size_t live_stacks_ = 0;
  // Hash buckets (power-of-two sized) holding the head of a chain of stack ids.
  std::vector<uint32_t> buckets_ = std::vector<uint32_t>(1024, kNone);

  // The recent-stack cache: slot -> stack id (kNone: empty). An entry is
  // cleared when its stack is dropped, and the whole cache when handles
  // are remapped, so a slot never names a dead or reused stack.
  static constexpr size_t kCacheSlots = 64;
  static constexpr size_t kCacheKeyFrames = 4;  // innermost frames in the key
  uint32_t cache_[kCacheSlots];
  uint64_t cache_hits_ = 0;
  void ClearCache() { std::fill(cache_, cache_ + kCacheSlots, kNone); }

 public:
  StackTable() { ClearCache(); }
};

}  // namespace fathom
