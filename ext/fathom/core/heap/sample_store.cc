#include "heap/sample_store.h"

#include "base/hash_util.h"
#include "heap/heap_aggregate.h"

namespace fathom {

size_t SampleKeyHash::operator()(const SampleKey& k) const {
  return HashCombine(HashCombine(HashCombine(Mix64(k.stack_id), k.class_label), k.thread_label), k.label_set);
}

HeapValues RecordValues(const SampleRecord& r, bool count_alloc, bool alive, uint64_t inuse_size) {
  HeapValues v;
  int64_t weight = static_cast<int64_t>(r.weight);
  if (count_alloc) {
    v.alloc_objects = weight;
    v.alloc_space = weight * static_cast<int64_t>(r.alloc_bytes);
    v.alloc_samples = 1;
  }
  if (alive) {
    v.inuse_objects = weight;
    v.inuse_space = weight * static_cast<int64_t>(inuse_size);
    v.inuse_samples = 1;
  }
  return v;
}

bool SampleStore::Commit(uint32_t index, const CommitInfo& info) {
  SampleRecord& r = records_[index];
  r.class_label = info.class_label;
  r.thread_label = info.thread_label;
  r.alloc_bytes = info.alloc_bytes;
  r.alloc_time_ns = info.time_ns;
  r.thread = 0;
  r.state = RecordState::kLive;
  if (exact_) {
    if (objects_watched_) {
      live_objects_.Insert(r.object, index);
    } else {
      r.object = 0;  // nothing would tell us of its death (ForgetObjects)
    }
    return true;
  }
  // r.object stays as the address the object had: no longer a reference
  // (the token is), but a dead object's slot that is free at the flush's
  // census tells the flush it died without a token lookup.
  r.liveness_token = info.liveness_token;
  return info.liveness_token != 0;
}

void SampleStore::ObjectFreed(uint64_t object) {
  uint32_t index = live_objects_.Erase(object);
  if (index == ObjectMap::kNotFound) return;
  SampleRecord& r = records_[index];
  r.state = RecordState::kFreed;
  r.next_freed = freed_head_;
  freed_head_ = index;
}

size_t SampleStore::DrainFreed(size_t limit) {
  size_t drained = 0;
  // Frees come in runs from the same allocation site: remember the last row.
  SampleKey last_key{StackTable::kNone, 0, 0};
  HeapValues* last_totals = nullptr;
  while (freed_head_ != UINT32_MAX && drained < limit) {
    uint32_t index = freed_head_;
    SampleRecord& r = records_[index];
    freed_head_ = r.next_freed;
    if (r.state != RecordState::kFreed) continue;  // recycled meanwhile (e.g. by a flush)
    if (!r.alloc_reported) {
      SampleKey key{r.stack_id, r.class_label, r.thread_label, r.label_set};
      if (!last_totals || !(key == last_key)) {
        auto [it, inserted] = freed_totals_.try_emplace(key);
        if (inserted) stacks_.Retain(r.stack_id);
        last_key = key;
        last_totals = &it->second;  // unordered_map nodes are stable
      }
      HeapValues v = RecordValues(r, /*count_alloc=*/true, /*alive=*/false, 0);
      AddValues(last_totals, v);
      if (keep_alloc_events_) alloc_events_.push_back(AllocEvent{r.alloc_time_ns, key, v.alloc_objects, v.alloc_space});
    }
    Recycle(index);
    drained++;
  }
  return drained;
}

HeapValues SampleStore::Report(uint32_t index, bool alive, uint64_t inuse_size, HeapAggregator* rows,
                               const Stratum& stratum) {
  SampleRecord& r = records_[index];
  SampleKey key{r.stack_id, r.class_label, r.thread_label, r.label_set};
  HeapValues v = RecordValues(r, !r.alloc_reported, alive, inuse_size);
  if (!r.alloc_reported) {
    r.alloc_reported = true;
    if (keep_alloc_events_) alloc_events_.push_back(AllocEvent{r.alloc_time_ns, key, v.alloc_objects, v.alloc_space});
  }
  // Added before recycling: the row's first reference keeps the stack.
  if (alive && stratum.valid()) {
    rows->AddStratified(key, stratum, v);
  } else if (v.alloc_objects != 0 || alive) {
    rows->Add(key, v);
  }
  if (!alive) {
    if (exact_) live_objects_.Erase(r.object);
    Recycle(index);
  }
  return v;
}

std::unordered_map<SampleKey, HeapValues, SampleKeyHash> SampleStore::TakeFreedTotals() {
  std::unordered_map<SampleKey, HeapValues, SampleKeyHash> out;
  out.swap(freed_totals_);
  return out;
}

uint32_t SampleStore::AddPending(const SampleRecord& record) {
  uint32_t index;
  if (!free_slots_.empty()) {
    index = free_slots_.back();
    free_slots_.pop_back();
    records_[index] = record;
  } else {
    index = static_cast<uint32_t>(records_.size());
    records_.push_back(record);
  }
  records_[index].state = RecordState::kPending;
  pending_.push_back(index);
  in_use_++;
  return index;
}

void SampleStore::DropPending(uint32_t index) {
  // Stays in pending_ until ClearPending; the committer and the mark
  // function skip it (no longer kPending), and a slot reused meanwhile by
  // AddPending is pushed to pending_ again.
  if (records_[index].state == RecordState::kPending) Recycle(index);
}

void SampleStore::SpreadWeight(const uint32_t* indices, size_t n) {
  if (n < 2) return;
  uint64_t total = 0;
  for (size_t i = 0; i < n; i++) total += records_[indices[i]].weight;
  // Integer shares that add up to `total` exactly, so alloc_objects stays
  // the exact allocation count.
  for (size_t i = 0; i < n; i++) records_[indices[i]].weight = total / n + (i < total % n ? 1 : 0);
}

void SampleStore::Recycle(uint32_t index) {
  SampleRecord& r = records_[index];
  if (r.state == RecordState::kFree) return;
  if (r.stack_id != StackTable::kNone) stacks_.Release(r.stack_id);
  r = SampleRecord{};
  free_slots_.push_back(index);
  in_use_--;
}

void SampleStore::ForgetObjects() {
  objects_watched_ = false;
  if (!exact_) return;  // sampled records keep a token, never a handle to follow
  live_objects_.Clear();
  for (SampleRecord& r : records_)
    if (r.state == RecordState::kLive) r.object = 0;
}

void SampleStore::Clear() {
  freed_totals_.clear();  // their stack references vanish with the stack table
  freed_head_ = UINT32_MAX;
  stacks_.Clear();
  live_objects_.Clear();
  records_.clear();
  free_slots_.clear();
  pending_.clear();
  alloc_events_.clear();
  in_use_ = 0;
  // Labels are kept: they are few and the ids stay valid.
}

}  // namespace fathom
