#include "stacks/stack_table.h"

#include <cassert>
#include <cstring>

#include "base/hash_util.h"

namespace fathom {

uint64_t StackTable::HashStack(const uint64_t* handles, const int32_t* lines, size_t depth,
                               bool truncated) const {
  // Runs in the allocation hook for every sample: one multiply per frame
  // (FxHash-style), with a full mix only at the end.
  uint64_t h = depth * 2 + (truncated ? 1 : 0);
  for (size_t i = 0; i < depth; i++) {
    uint64_t v = handles[i] ^ (static_cast<uint64_t>(static_cast<uint32_t>(lines[i])) << 40);
    h = (((h << 5) | (h >> 59)) ^ v) * 0x517cc1b727220a95ULL;
  }
  return Mix64(h);
}

bool StackTable::Matches(const Stack& s, const uint64_t* handles, const int32_t* lines, size_t depth,
                         bool truncated) const {
  // The stack keeps its own copy of its handles, so this is two memcmps
  // rather than a lookup through the frame table per frame.
  // An empty stack (an allocation with no Ruby frame: a thread's start,
  // a C extension's own thread) has null data pointers, which memcmp must
  // not be given even with length 0 (UBSan).
  if (s.handles.size() != depth || s.truncated != truncated) return false;
  if (depth == 0) return true;
  return std::memcmp(s.lines.data(), lines, depth * sizeof(int32_t)) == 0 &&
         std::memcmp(s.handles.data(), handles, depth * sizeof(uint64_t)) == 0;
}

uint32_t StackTable::CacheSlot(const uint64_t* handles, const int32_t* lines, size_t depth, bool truncated) {
  // Only a key: which slot to look in. Correctness rests on SameStack.
  uint64_t h = depth * 2 + (truncated ? 1 : 0);
  size_t n = depth < kCacheKeyFrames ? depth : kCacheKeyFrames;
  for (size_t i = 0; i < n; i++)
    h = (h ^ handles[i] ^ (static_cast<uint64_t>(static_cast<uint32_t>(lines[i])) << 40)) * 0x9e3779b97f4a7c15ULL;
  return static_cast<uint32_t>(Mix64(h) & (kCacheSlots - 1));
}

bool StackTable::SameStack(const Stack& s, const uint64_t* handles, const int32_t* lines, size_t depth,
                           bool truncated) const {
  // Every frame and every line is compared: equal stacks, not likely ones.
  return s.refcount > 0 && Matches(s, handles, lines, depth, truncated);
}

uint32_t StackTable::Intern(const uint64_t* handles, const int32_t* lines, size_t depth, bool truncated) {
  uint32_t slot = CacheSlot(handles, lines, depth, truncated);
  uint32_t cached = cache_[slot];
  if (cached != kNone && SameStack(stacks_[cached], handles, lines, depth, truncated)) {
    stacks_[cached].refcount++;
    cache_hits_++;
    return cached;
  }
  uint32_t id = InternUncached(handles, lines, depth, truncated);
  cache_[slot] = id;
  return id;
}

uint32_t StackTable::InternUncached(const uint64_t* handles, const int32_t* lines, size_t depth, bool truncated) {
  uint64_t h = HashStack(handles, lines, depth, truncated);
  for (uint32_t id = buckets_[h & (buckets_.size() - 1)]; id != kNone; id = stacks_[id].next_in_bucket) {
    Stack& s = stacks_[id];
    if (s.hash == h && Matches(s, handles, lines, depth, truncated)) {
      s.refcount++;
      return id;
    }
  }

  uint32_t id;
  if (!free_stacks_.empty()) {
    id = free_stacks_.back();
    free_stacks_.pop_back();
  } else {
    id = static_cast<uint32_t>(stacks_.size());
    stacks_.emplace_back();
  }
  Stack& s = stacks_[id];
  s.frames.resize(depth);
  s.lines.assign(lines, lines + depth);
  s.handles.assign(handles, handles + depth);
  for (size_t i = 0; i < depth; i++) s.frames[i] = AcquireFrame(handles[i]);
  s.hash = h;
  s.refcount = 1;
  s.truncated = truncated;
  live_stacks_++;
  // Keep chains short: grow the bucket array when it is as full as the table.
  if (live_stacks_ > buckets_.size()) {
    buckets_.assign(buckets_.size() * 2, kNone);
    for (uint32_t i = 0; i < stacks_.size(); i++)
      if (stacks_[i].refcount > 0) LinkIntoBucket(i);
  } else {
    LinkIntoBucket(id);
  }
  return id;
}

void StackTable::Retain(uint32_t stack_id) { stacks_[stack_id].refcount++; }

void StackTable::Release(uint32_t stack_id) {
  Stack& s = stacks_[stack_id];
  assert(s.refcount > 0);
  if (--s.refcount > 0) return;
  uint32_t& slot = cache_[CacheSlot(s.handles.data(), s.lines.data(), s.handles.size(), s.truncated)];
  if (slot == stack_id) slot = kNone;
  UnlinkFromBucket(stack_id);
  for (uint32_t f : s.frames) ReleaseFrame(f);
  s.frames.clear();
  s.handles.clear();
  s.lines.clear();
  free_stacks_.push_back(stack_id);
  live_stacks_--;
}

uint32_t StackTable::AcquireFrame(uint64_t handle) {
  uint32_t idx = frame_index_.Find(handle);
  if (idx == ObjectMap::kNotFound) {
    if (!free_frames_.empty()) {
      idx = free_frames_.back();
      free_frames_.pop_back();
    } else {
      idx = static_cast<uint32_t>(frames_.size());
      frames_.emplace_back();
    }
    frames_[idx].handle = handle;
    frames_[idx].symbol = FrameSymbol{};
    frame_index_.Insert(handle, idx);
  }
  frames_[idx].refcount++;
  return idx;
}

void StackTable::ReleaseFrame(uint32_t frame_index) {
  Frame& f = frames_[frame_index];
  assert(f.refcount > 0);
  if (--f.refcount > 0) return;
  frame_index_.Erase(f.handle);
  f.handle = 0;
  f.symbol = FrameSymbol{};
  free_frames_.push_back(frame_index);
}

void StackTable::LinkIntoBucket(uint32_t stack_id) {
  uint32_t& head = buckets_[stacks_[stack_id].hash & (buckets_.size() - 1)];
  stacks_[stack_id].next_in_bucket = head;
  head = stack_id;
}

void StackTable::UnlinkFromBucket(uint32_t stack_id) {
  uint32_t* link = &buckets_[stacks_[stack_id].hash & (buckets_.size() - 1)];
  while (*link != stack_id) link = &stacks_[*link].next_in_bucket;
  *link = stacks_[stack_id].next_in_bucket;
}

void StackTable::RebuildIndexes() {
  ClearCache();  // the slots were keyed by the old handles
  frame_index_.Clear();
  for (uint32_t i = 0; i < frames_.size(); i++)
    if (frames_[i].refcount > 0) frame_index_.Insert(frames_[i].handle, i);
  std::fill(buckets_.begin(), buckets_.end(), kNone);
  for (uint32_t i = 0; i < stacks_.size(); i++) {
    Stack& s = stacks_[i];
    if (s.refcount == 0) continue;
    for (size_t j = 0; j < s.frames.size(); j++) s.handles[j] = frames_[s.frames[j]].handle;
    s.hash = HashStack(s.handles.data(), s.lines.data(), s.handles.size(), s.truncated);
    LinkIntoBucket(i);
  }
}

void StackTable::Clear() {
  frames_.clear();
  free_frames_.clear();
  frame_index_.Clear();
  stacks_.clear();
  free_stacks_.clear();
  live_stacks_ = 0;
  buckets_.assign(1024, kNone);
  ClearCache();
}

}  // namespace fathom
