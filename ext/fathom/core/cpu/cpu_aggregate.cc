#include "cpu/cpu_aggregate.h"

#include "base/hash_util.h"

namespace fathom {

size_t CpuAggregate::KeyHash::operator()(const CpuKey& k) const {
  uint64_t h = (static_cast<uint64_t>(k.stack_id) << 32) ^ static_cast<uint32_t>(k.thread_id);
  h ^= static_cast<uint64_t>(k.state) << 61;
  h ^= static_cast<uint64_t>(k.native_id) * 0xc2b2ae3d27d4eb4fULL;
  h *= 0x9e3779b97f4a7c15ULL;
  return static_cast<size_t>(h ^ (h >> 29));
}

void CpuAggregate::Add(const SampleHeader& header, const uint64_t* frames, const int32_t* lines) {
  CpuValues v;
  v.samples = 1;
  v.cpu_ns = header.cpu_delta_ns > 0 ? header.cpu_delta_ns : 0;
  v.wall_ns = header.wall_delta_ns > 0 ? header.wall_delta_ns : 0;
  uint32_t stack = stacks_.Intern(frames, lines, header.depth, header.truncated);
  uint32_t native_id = 0;
  if (header.native != nullptr && header.native_depth > 0) {
    std::string bytes(reinterpret_cast<const char*>(header.native), header.native_depth * sizeof(uintptr_t));
    auto n = native_index_.find(bytes);
    if (n == native_index_.end()) {
      native_id = static_cast<uint32_t>(natives_.size());
      natives_.emplace_back(header.native, header.native + header.native_depth);
      native_index_.emplace(std::move(bytes), native_id);
    } else {
      native_id = n->second;
    }
  }
  CpuKey key{stack, header.thread_id, header.state, native_id};
  auto it = index_.find(key);
  if (it == index_.end()) {
    index_.emplace(key, entries_.size());
    entries_.push_back(Entry{key, v});
  } else {
    entries_[it->second].values.Add(v);
    stacks_.Release(stack);  // the key already holds its reference
  }
  if (keep_timeline_) {
    stacks_.Retain(stack);
    timeline_.push_back(
        CpuTimelineSample{header.time_ns, header.thread_id, stack, header.state, v.cpu_ns, v.wall_ns, native_id});
  }
  size_t s = static_cast<size_t>(header.state);
  if (s >= kThreadStateCount) s = static_cast<size_t>(ThreadState::kUnknown);
  threads_[header.thread_id][s].Add(v);
}

CpuValues CpuAggregate::total() const {
  CpuValues t;
  for (const Entry& e : entries_) t.Add(e.values);
  return t;
}

void CpuAggregate::Clear() {
  for (const Entry& e : entries_) stacks_.Release(e.key.stack_id);
  for (const CpuTimelineSample& t : timeline_) stacks_.Release(t.stack_id);
  timeline_.clear();
  entries_.clear();
  index_.clear();
  threads_.clear();
  natives_.resize(1);
  native_index_.clear();
}

}  // namespace fathom
