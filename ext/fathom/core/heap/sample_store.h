// SampleStore: the records behind a heap profile.
//
// One record per sampled allocation. The store owns the record's state
// machine; the Ruby layer only measures and names things and hands them in:
//
//   AddPending  (NEWOBJ hook)      free    -> pending
//   Commit      (postponed job)    pending -> live     (labels, size, token)
//   ObjectFreed (FREEOBJ hook)     live    -> freed    (exact mode)
//   DrainFreed  (commit, flush)    freed   -> free     (folded into totals)
//   Report      (flush walk)       live    -> live, or free if it died
//
// A record is born "pending" in the allocation hook (where Ruby forbids
// allocating and the object is not yet initialized) and becomes "live" once
// committed from a safe point. Report gives each record's allocation once
// (alloc_*, weighted) and its in-use values while it lives, and recycles it
// when it died. Records sit in a vector addressed by index, so a walk over
// them can be interrupted (the flush yields the GVL) while the hooks append.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "heap_census/live_strata.h"
#include "heap/heap_schema.h"
#include "base/object_map.h"
#include "stacks/stack_table.h"
#include "base/string_interner.h"

namespace fathom {

class HeapAggregator;

enum class RecordState : uint8_t { kFree, kPending, kLive, kFreed };

struct SampleRecord {
  uint64_t object = 0;       // object handle: valid while pending, and in exact mode while live
                             // (token mode: its address at commit, only compared, never followed)
  uint64_t liveness_token = 0;  // sampled mode: the token the flush asks about (0 = untracked)
  uint64_t thread = 0;       // allocating thread's handle, valid while pending
  uint64_t weight = 0;       // allocations this sample stands for (1 in exact mode)
  uint64_t alloc_bytes = 0;  // size measured at commit, soon after allocation
  int64_t alloc_time_ns = 0; // monotonic time of the commit (a safe point soon after allocation)
  uint32_t stack_id = StackTable::kNone;
  uint32_t class_label = 0;
  uint32_t thread_label = 0;
  // The request labels current on the allocating thread (LabelSets id, read
  // in the NEWOBJ hook of a sampled allocation only; 0: none). Both the
  // record's alloc_* and its inuse_* values carry them.
  uint32_t label_set = 0;
  uint32_t next_freed = UINT32_MAX;  // intrusive list of freed records (see ObjectFreed)
  RecordState state = RecordState::kFree;
  bool alloc_reported = false;  // already counted in an earlier flush's alloc_* values
};

// What the Ruby layer learned about a pending record's object at commit.
struct CommitInfo {
  uint32_t class_label = 0;
  uint32_t thread_label = 0;
  uint64_t alloc_bytes = 0;
  uint64_t liveness_token = 0;  // sampled mode: the token for this object (0 = untrackable)
  int64_t time_ns = 0;          // monotonic time of the commit
};

// What a profile row is keyed by.
struct SampleKey {
  uint32_t stack_id, class_label, thread_label;
  uint32_t label_set = 0;  // SampleRecord::label_set
  bool operator==(const SampleKey& o) const {
    return stack_id == o.stack_id && class_label == o.class_label && thread_label == o.thread_label &&
           label_set == o.label_set;
  }
};
struct SampleKeyHash {
  size_t operator()(const SampleKey& k) const;
};

// One sampled allocation with its time, kept when asked for
// (set_keep_alloc_events: the Firefox timeline). Its key is also a row of
// the flush's aggregator (or of the freed totals), which keeps its stack.
struct AllocEvent {
  int64_t time_ns;
  SampleKey key;
  int64_t objects, bytes;  // weighted, as alloc_objects / alloc_space
};

// What a record adds to its row at a flush (the heap profile's schema,
// heap_schema.h): with count_alloc (the first time it is reported) its
// allocation, weighted (alloc_*); while alive, its object, weighted, at
// inuse_size bytes (inuse_*).
HeapValues RecordValues(const SampleRecord& r, bool count_alloc, bool alive, uint64_t inuse_size);

class SampleStore {
 public:
  // How a live record learns that its object died. Exact mode: the object
  // handle is kept and ObjectFreed retires it. Sampled mode (the default):
  // only an opaque token is kept (the Ruby layer's LivenessTokens), and the
  // flush asks whether it still leads to an object.
  void set_exact(bool exact) { exact_ = exact; }

  StackTable& stacks() { return stacks_; }
  const StackTable& stacks() const { return stacks_; }
  StringInterner& labels() { return labels_; }
  const StringInterner& labels_const() const { return labels_; }

  // ---- hook half (inside the allocator: no Ruby calls)
  // Adds a pending record; takes over one reference to record.stack_id.
  // Returns its index.
  uint32_t AddPending(const SampleRecord& record);
  // Keep an AllocEvent per record when its allocation is first counted
  // (Report or DrainFreed): 40 bytes a record, so off unless a timeline is
  // wanted.
  void set_keep_alloc_events(bool keep) { keep_alloc_events_ = keep; }
  bool keep_alloc_events() const { return keep_alloc_events_; }
  std::vector<AllocEvent> TakeAllocEvents() { return std::move(alloc_events_); }

  // Indices of records waiting for commit, in allocation order. Commit them
  // by index (the hooks may append while the committer calls Ruby), then
  // ClearPending.
  const std::vector<uint32_t>& pending() const { return pending_; }
  void ClearPending() { pending_.clear(); }

  // ---- commit (safe point): pending -> live. Exact mode indexes the object
  // for ObjectFreed; sampled mode drops the handle and keeps the liveness token.
  // Returns false if the record cannot be followed (sampled mode, no id).
  bool Commit(uint32_t index, const CommitInfo& info);

  // ---- thinning at commit (sampled mode, see heap_sampling/byte_thinning.h): a
  // pending candidate that is not kept is dropped (its stack released, its
  // slot recycled; it is reported nowhere), a kept one gets its weight
  // scaled by 1/p. Both before Commit.
  void DropPending(uint32_t index);
  void SetWeight(uint32_t index, uint64_t weight) { records_[index].weight = weight; }

  // ---- free (exact mode, FREEOBJ hook during GC sweep): if `object` is a
  // live record's, marks it freed. Never allocates or frees: the record is
  // linked into a list through itself and the map only gets a tombstone.
  void ObjectFreed(uint64_t object);
  // Folds freed records into per-key allocation totals and recycles them,
  // so a churning program keeps only live records (exact mode would
  // otherwise hold one record per allocation until the next flush).
  // Allocates: call outside GC. Drains at most `limit` records (so a caller
  // holding a lock can pause between batches); returns how many it recycled.
  size_t DrainFreed(size_t limit = SIZE_MAX);
  bool has_freed() const { return freed_head_ != UINT32_MAX; }
  // The values of drained records since the last TakeFreedTotals, per row.
  // Each entry holds a reference on its stack, which the caller takes over.
  std::unordered_map<SampleKey, HeapValues, SampleKeyHash> TakeFreedTotals();

  // ---- report (flush walk): a live record's values for this flush, added
  // to `rows` under its key. alloc_* (weighted) the first time a record is
  // reported only; inuse_* (weighted, inuse_size per object) while `alive`.
  // A record reported dead is recycled (and, exact mode, forgotten by the map).
  // A live record with a `stratum` (sampled mode, live_strata.h) has its
  // inuse_* held by the aggregator until the census calibrates them.
  HeapValues Report(uint32_t index, bool alive, uint64_t inuse_size, HeapAggregator* rows,
                    const Stratum& stratum = Stratum());

  // ---- exact mode: a live record's object handle is good only while
  // Ruby's FREEOBJ hook tells the store of its object's death (ObjectFreed).
  // Once nothing does (another profiler took the hook, a Ractor started:
  // heap_collector.cc ReleaseFreeobjOwnership), a dead object's slot may be
  // freed, reused, or its whole page returned to the OS, and following the
  // handle (GC.compact's RemapObjects, a flush's memsize, live_objects)
  // reads freed memory: 3 runs in 3 crashed in rb_gc_location on every
  // tested Ruby. ForgetObjects drops the handles (object becomes 0, never
  // a heap object): such a record is reported not alive at its next flush
  // and recycled, and commits keep no handle until WatchObjects (start).
  void ForgetObjects();
  void WatchObjects() { objects_watched_ = true; }
  // Exact mode: whether a live record still knows its object.
  bool object_known(uint32_t index) const { return records_[index].object != 0; }

  // ---- GC compaction (exact mode): live objects moved; remap(handle) gives
  // the new handle. Forgotten handles are not followed.
  template <typename F>
  void RemapObjects(F&& remap) {
    if (!exact_) return;
    live_objects_.Clear();
    for (uint32_t i = 0; i < capacity(); i++) {
      SampleRecord& r = records_[i];
      if (r.state != RecordState::kLive || r.object == 0) continue;
      r.object = remap(r.object);
      live_objects_.Insert(r.object, i);
    }
  }

  // Sampled mode takes a burst of samples per timer tick; together they
  // stand for every allocation since the previous burst. The hook gives
  // each record the allocations since the sample before it (so the first
  // of a burst carries the whole gap); this spreads their sum evenly over
  // the burst's records, so that each is weighted as one of n draws from
  // the same period. The total weight is unchanged. Call before any of the
  // records is reported.
  void SpreadWeight(const uint32_t* indices, size_t n);

  const SampleRecord& at(uint32_t index) const { return records_[index]; }
  bool is_live(uint32_t index) const { return records_[index].state == RecordState::kLive; }
  // Upper bound for indices (includes free slots).
  uint32_t capacity() const { return static_cast<uint32_t>(records_.size()); }
  size_t live_count() const { return in_use_; }

  void Clear();

 private:
  // Drops a record: releases its stack and recycles the slot.
  void Recycle(uint32_t index);

  bool exact_ = false;
  bool objects_watched_ = true;  // exact mode: see ForgetObjects
  StackTable stacks_;
  StringInterner labels_;
  ObjectMap live_objects_;  // exact mode: object handle -> record index
  std::vector<SampleRecord> records_;
  std::vector<uint32_t> free_slots_;
  std::vector<uint32_t> pending_;
  uint32_t freed_head_ = UINT32_MAX;
  std::unordered_map<SampleKey, HeapValues, SampleKeyHash> freed_totals_;
  size_t in_use_ = 0;
  bool keep_alloc_events_ = false;
  std::vector<AllocEvent> alloc_events_;
};

}  // namespace fathom
