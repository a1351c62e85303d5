// Heap profile aggregation: adds sample records' values up per (stack,
// class, thread), as the schema says (heap_schema.h), during the flush's walk (SampleStore::Report adds to it,
// under the GVL), holding sampled mode's in-use values until the census
// calibrates them (heap_census/live_strata.h). heap/heap_rows.h
// copies the result out.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "heap/sample_store.h"
#include "heap_census/live_strata.h"

namespace fathom {

class HeapAggregator {
 public:
  using Key = SampleKey;

  explicit HeapAggregator(StackTable& stacks) : stacks_(stacks) {}
  ~HeapAggregator() { ReleaseStacks(); }
  HeapAggregator(const HeapAggregator&) = delete;
  HeapAggregator& operator=(const HeapAggregator&) = delete;

  // Adds values to the row for key. The first row of a stack takes a
  // reference on it, so the stack outlives the records that are recycled
  // during the walk.
  void Add(const Key& key, const HeapValues& values);
  // Sampled mode, a live record whose object is in a census stratum
  // (live_strata.h): its inuse_objects and inuse_space, the two values the
  // census calibrates, are held until ApplyStrata scales them; the rest of
  // `values` goes to the row now.
  void AddStratified(const Key& key, const Stratum& stratum, const HeapValues& values);
  // Adds the held values to strata's sampled side.
  void CollectSampled(LiveStrata* strata) const;
  // Adds the held values to their rows, scaled by their stratum's factors
  // (rounded per row). Without a census: factors of 1, the plain estimate.
  void ApplyStrata(const LiveStrata& strata);
  // Adds SampleStore::TakeFreedTotals() output and drops the references it carried.
  void AddFreedTotals(std::unordered_map<SampleKey, HeapValues, SampleKeyHash>&& totals);
  const std::unordered_map<Key, HeapValues, SampleKeyHash>& rows() const { return rows_; }
  // Drops the stack references (idempotent; also done by the destructor).
  void ReleaseStacks();

 private:
  StackTable& stacks_;
  std::unordered_map<Key, HeapValues, SampleKeyHash> rows_;
  std::vector<uint32_t> retained_stacks_;
  struct Stratified {
    Key key;
    Stratum stratum;
    int64_t objects, space;  // inuse_objects, inuse_space
  };
  std::vector<Stratified> stratified_;
};

}  // namespace fathom
