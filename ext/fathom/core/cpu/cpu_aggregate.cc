#include "cpu/cpu_aggregate.h"

#include "base/hash_util.h"

namespace fathom {

size_t CpuAggregate::KeyHash::operator()(const CpuKey& k) const {
  uint64_t h = (static_cast<uint64_t>(k.stack_id) << 32) ^ static_cast<uint32_t>(k.thread_id);
  h ^= static_cast<uint64_t>(k.state) << 61;
  h ^= static_cast<uint64_t>(k.native_id) * 0xc2b2ae3d27d4eb4fULL;
  h ^= static_cast<uint64_t>(k.label_set) * 0x165667b19e3779f9ULL;
  h ^= k.span_id * 0xd6e8feb86659fd93ULL;
  h *= 0x9e3779b97f4a7c15ULL;
  return static_cast<size_t>(h ^ (h >> 29));
}

void CpuAggregate::Add(const SampleHeader& header, const uint64_t* frames, const int32_t* lines) {
  uint32_t stack;
  auto last = last_stack_.find(header.thread_id);
  if (header.stack_from_previous && last != last_stack_.end()) {
    stack = last->second;
    stacks_.Retain(stack);
  } else {
    stack = stacks_.Intern(frames, lines, header.depth, header.truncated);
    if (header.depth > 0) {
      stacks_.Retain(stack);
      if (last != last_stack_.end()) {
        stacks_.Release(last->second);
        last->second = stack;
      } else {
        last_stack_.emplace(header.thread_id, stack);
      }
    }
  }
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
  AccountedPart parts[2];
  int n = AccountedParts(header, mode_, parts);
  for (int i = 0; i < n; i++) {
    CpuValues v;
    v.samples = parts[i].samples;
    v.cpu_ns = parts[i].cpu_ns;
    v.wall_ns = parts[i].wall_ns;
    CpuKey key{stack, header.thread_id, parts[i].state, native_id, header.label_set, header.span_id};
    auto it = index_.find(key);
    if (it == index_.end()) {
      stacks_.Retain(stack);  // one reference per key
      index_.emplace(key, entries_.size());
      entries_.push_back(Entry{key, v});
    } else {
      entries_[it->second].values.Add(v);
    }
    size_t s = static_cast<size_t>(parts[i].state);
    if (s >= kThreadStateCount) s = static_cast<size_t>(ThreadState::kUnknown);
    threads_[header.thread_id][s].Add(v);
  }
  if (keep_timeline_) {
    stacks_.Retain(stack);
    int64_t cpu = header.cpu_delta_ns > 0 ? header.cpu_delta_ns : 0;
    int64_t wall = header.wall_delta_ns > 0 ? header.wall_delta_ns : 0;
    timeline_.push_back(
        CpuTimelineSample{header.time_ns, header.thread_id, stack, TimelineState(header, mode_), cpu, wall, native_id});
  }
  stacks_.Release(stack);  // the reference Intern or the lookup took; keys and the timeline hold their own
}

CpuValues CpuAggregate::total() const {
  CpuValues t;
  for (const Entry& e : entries_) t.Add(e.values);
  return t;
}

void CpuAggregate::Clear() {
  for (const Entry& e : entries_) stacks_.Release(e.key.stack_id);
  for (const CpuTimelineSample& t : timeline_) stacks_.Release(t.stack_id);
  for (const auto& [tid, stack] : last_stack_) stacks_.Release(stack);
  last_stack_.clear();
  timeline_.clear();
  entries_.clear();
  index_.clear();
  threads_.clear();
  natives_.resize(1);
  native_index_.clear();
}

}  // namespace fathom
