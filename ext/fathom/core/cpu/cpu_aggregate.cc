#include "cpu/cpu_aggregate.h"

#include "base/hash_util.h"

namespace fathom {

size_t CpuAggregate::KeyHash::operator()(const CpuKey& k) const {
  uint64_t h = (static_cast<uint64_t>(k.stack_id) << 32) ^ static_cast<uint32_t>(k.thread_id);
  h ^= static_cast<uint64_t>(k.state) << 61;
  h ^= static_cast<uint64_t>(k.native_id) * 0xc2b2ae3d27d4eb4fULL;
  h ^= HashOf(k.labels) * 0xd6e8feb86659fd93ULL;
  h *= 0x9e3779b97f4a7c15ULL;
  return static_cast<size_t>(h ^ (h >> 29));
}

void CpuAggregate::Add(const SampleHeader& header, const uint64_t* frames, const int32_t* lines) {
  uint32_t native_id = InternNative(header);
  auto last = last_stack_.find(header.thread_id);
  auto held = pending_.find(header.thread_id);
  // Its previous stack, unless the thread took the GVL since (3.2+ knows):
  // it may then have run on and blocked elsewhere. Or its previous sample
  // is itself held.
  if (header.stack_from_previous && last != last_stack_.end() && held == pending_.end() &&
      header.gvl_since_previous != GvlSincePrevious::kTaken) {
    Account(header, last->second, native_id);
    return;
  }
  if (header.stack_from_previous && header.state != ThreadState::kGc) {
    // No stack of it yet (its first samples fell in a GC), or a stale one:
    // held until its next stack is read (see pending_). Those held before
    // it share its stack only if the thread stayed put in between.
    if (held != pending_.end() && !RanNoRubySince(header)) SettleHeld(&held->second, kNoStack);
    std::vector<Pending>& list = pending_[header.thread_id];
    // Bounded: a thread sampled only in GCs (GC.stress) settles as it goes.
    if (list.size() >= kMaxHeld) SettleHeld(&list, kNoStack);
    Pending p{header, native_id};
    p.header.native = nullptr;  // the ring's cell: reused after the drain
    list.push_back(p);
    return;
  }
  uint32_t stack = stacks_.Intern(frames, lines, header.depth, header.truncated);
  if (header.depth > 0) {
    stacks_.Retain(stack);
    if (last != last_stack_.end()) {
      stacks_.Release(last->second);
      last->second = stack;
    } else {
      last_stack_.emplace(header.thread_id, stack);
    }
  }
  // A stack read settles the held samples; a sample without one (stopped by
  // the GC while it waited for the GVL) only if the thread ran since.
  bool ran = !RanNoRubySince(header);
  if (held != pending_.end() && (header.depth > 0 || ran)) {
    SettleHeld(&held->second, ran ? kNoStack : stack);
    pending_.erase(held);
  }
  if (!header.stack_probe) Account(header, stack, native_id);
  stacks_.Release(stack);  // the reference Intern took; keys and the timeline hold their own
}

// Whether a thread ran no Ruby code between its previous (held) sample and
// this one, so that it was then where this sample finds it. Ruby 3.2+
// knows: it was off the GVL at the held sample (or the GC would have
// stopped it) and did not take it in between. On 3.1, judged as StoppedByGc
// (cpu_sampler.cc) judges a sleeper: its CPU clock moved for under a
// quarter of the time. A thread in C without the GVL burns CPU there, so on
// 3.1 its held samples keep no stack.
bool CpuAggregate::RanNoRubySince(const SampleHeader& header) {
  switch (header.gvl_since_previous) {
    case GvlSincePrevious::kNotTaken:
      return true;
    case GvlSincePrevious::kTaken:
      return false;
    case GvlSincePrevious::kUnknown:
      break;
  }
  return header.cpu_delta_ns * 4 < header.wall_delta_ns;
}

uint32_t CpuAggregate::InternNative(const SampleHeader& header) {
  if (header.native == nullptr || header.native_depth == 0) return 0;
  std::string bytes(reinterpret_cast<const char*>(header.native), header.native_depth * sizeof(uintptr_t));
  auto n = native_index_.find(bytes);
  if (n != native_index_.end()) return n->second;
  uint32_t native_id = static_cast<uint32_t>(natives_.size());
  natives_.emplace_back(header.native, header.native + header.native_depth);
  native_index_.emplace(std::move(bytes), native_id);
  return native_id;
}

void CpuAggregate::SettleHeld(std::vector<Pending>* held, uint32_t stack) {
  bool empty = stack == kNoStack;
  const uint64_t no_frame = 0;  // not read (depth 0), but never a null pointer for memcmp
  const int32_t no_line = 0;
  if (empty) stack = stacks_.Intern(&no_frame, &no_line, 0, false);
  for (const Pending& p : *held) Account(p.header, stack, p.native_id);
  if (empty) stacks_.Release(stack);
  held->clear();
}

void CpuAggregate::SettlePending() {
  for (auto& [tid, held] : pending_) SettleHeld(&held, kNoStack);
  pending_.clear();
}

void CpuAggregate::ForgetThread(int32_t thread_id) {
  auto held = pending_.find(thread_id);
  if (held != pending_.end()) {
    SettleHeld(&held->second, kNoStack);
    pending_.erase(held);
  }
  auto last = last_stack_.find(thread_id);
  if (last != last_stack_.end()) {
    stacks_.Release(last->second);
    last_stack_.erase(last);
  }
}

void CpuAggregate::ForgetThreads() {
  SettlePending();
  for (const auto& [tid, stack] : last_stack_) stacks_.Release(stack);
  last_stack_.clear();
}

// Takes its own references (one per new key, one per timeline sample).
void CpuAggregate::Account(const SampleHeader& header, uint32_t stack, uint32_t native_id) {
  AccountedPart parts[2];
  int n = AccountedParts(header, mode_, parts);
  for (int i = 0; i < n; i++) {
    const CpuValues& v = parts[i].values;
    CpuKey key{stack, header.thread_id, parts[i].state, native_id, header.labels};
    auto it = index_.find(key);
    if (it == index_.end()) {
      stacks_.Retain(stack);  // one reference per key
      index_.emplace(key, entries_.size());
      entries_.push_back(Entry{key, v});
    } else {
      AddValues(&entries_[it->second].values, v);
    }
    size_t s = static_cast<size_t>(parts[i].state);
    if (s >= kThreadStateCount) s = static_cast<size_t>(ThreadState::kUnknown);
    AddValues(&threads_[header.thread_id][s], v);
  }
  if (keep_timeline_) {
    stacks_.Retain(stack);
    int64_t cpu = header.cpu_delta_ns > 0 ? header.cpu_delta_ns : 0;
    int64_t wall = header.wall_delta_ns > 0 ? header.wall_delta_ns : 0;
    timeline_.push_back(
        CpuTimelineSample{header.time_ns, header.thread_id, stack, TimelineState(header, mode_), cpu, wall, native_id});
  }
}

CpuValues CpuAggregate::total() const {
  CpuValues t;
  for (const Entry& e : entries_) AddValues(&t, e.values);
  return t;
}

void CpuAggregate::Clear() {
  pending_.clear();  // TakeData settled them; after a fork they were the parent's threads' (no references held)
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
