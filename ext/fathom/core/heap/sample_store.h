// SampleStore: the records behind a heap profile.
//
// One record per sampled allocation. A record is born "pending" in the
// allocation hook (where Ruby forbids allocating and the object is not yet
// initialized), becomes "live" once the Ruby layer has committed it from a
// safe point (class name, size, liveness token), and "freed" when its object
// is known dead. Flush reports freed records once, in alloc_*, and recycles
// them. Records sit in a vector addressed by index, so a walk over them can
// be interrupted (the flush yields the GVL) while the hooks append.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "heap/object_map.h"
#include "heap/stack_table.h"
#include "base/string_interner.h"

namespace fathom {

enum class RecordState : uint8_t { kFree, kPending, kLive, kFreed };

struct SampleRecord {
  uint64_t object = 0;       // object handle: valid while pending, and in exact mode while live
  uint64_t object_id = 0;    // sampled mode: Ruby's object_id, the liveness token (0 = untracked)
  uint64_t thread = 0;       // allocating thread's handle, valid while pending
  uint64_t weight = 0;       // allocations this sample stands for (1 in exact mode)
  uint64_t alloc_bytes = 0;  // size measured at commit, soon after allocation
  uint32_t stack_id = StackTable::kNone;
  uint32_t class_label = 0;
  uint32_t thread_label = 0;
  uint32_t next_freed = UINT32_MAX;  // intrusive list of freed records (see MarkFreed)
  RecordState state = RecordState::kFree;
  bool alloc_reported = false;  // already counted in an earlier flush's alloc_* values
};

// What a profile row is keyed by.
struct SampleKey {
  uint32_t stack_id, class_label, thread_label;
  bool operator==(const SampleKey& o) const {
    return stack_id == o.stack_id && class_label == o.class_label && thread_label == o.thread_label;
  }
};
struct SampleKeyHash {
  size_t operator()(const SampleKey& k) const;
};

// Allocation totals of records already recycled, waiting for the next flush.
struct AllocTotals {
  int64_t objects = 0;
  int64_t bytes = 0;
};

class SampleStore {
 public:
  StackTable& stacks() { return stacks_; }
  const StackTable& stacks() const { return stacks_; }
  StringInterner& labels() { return labels_; }
  const StringInterner& labels_const() const { return labels_; }
  ObjectMap& live_objects() { return live_objects_; }

  // Adds a pending record (the hook's half); takes over one reference to
  // record.stack_id. Returns its index.
  uint32_t AddPending(const SampleRecord& record);
  // Indices of records waiting for commit, in allocation order.
  std::vector<uint32_t>& pending() { return pending_; }

  SampleRecord& at(uint32_t index) { return records_[index]; }
  const SampleRecord& at(uint32_t index) const { return records_[index]; }
  // Upper bound for indices (includes free slots).
  uint32_t capacity() const { return static_cast<uint32_t>(records_.size()); }
  size_t live_count() const { return in_use_; }

  // Drops a record: releases its stack and recycles the slot.
  void Recycle(uint32_t index);

  // Marks a live record's object dead. Called from the FREEOBJ hook during
  // GC sweep: links the record into a list through the record itself, so it
  // neither allocates nor frees.
  void MarkFreed(uint32_t index);
  // Folds freed records into per-key allocation totals and recycles them,
  // so a churning program keeps only live records (exact mode would
  // otherwise hold one record per allocation until the next flush).
  // Allocates: call outside GC.
  // Drains at most `limit` records (so a caller holding a lock can pause
  // between batches) and returns how many it recycled.
  size_t DrainFreed(size_t limit = SIZE_MAX);
  bool has_freed() const { return freed_head_ != UINT32_MAX; }
  // Totals of drained records since the last TakeFreedTotals. Each entry
  // holds a reference on its stack, which the caller takes over.
  std::unordered_map<SampleKey, AllocTotals, SampleKeyHash> TakeFreedTotals();

  void Clear();

 private:
  StackTable stacks_;
  StringInterner labels_;
  ObjectMap live_objects_;  // exact mode: object handle -> record index
  std::vector<SampleRecord> records_;
  std::vector<uint32_t> free_slots_;
  std::vector<uint32_t> pending_;
  uint32_t freed_head_ = UINT32_MAX;
  std::unordered_map<SampleKey, AllocTotals, SampleKeyHash> freed_totals_;
  size_t in_use_ = 0;
};

}  // namespace fathom
