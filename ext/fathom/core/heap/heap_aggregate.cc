#include "heap/heap_aggregate.h"

#include <cmath>

namespace fathom {

void HeapAggregator::Add(const Key& key, const HeapValues& v) {
  auto [it, inserted] = rows_.try_emplace(key);
  if (inserted) {
    stacks_.Retain(key.stack_id);
    retained_stacks_.push_back(key.stack_id);
  }
  AddValues(&it->second, v);
}

void HeapAggregator::AddStratified(const Key& key, const Stratum& stratum, const HeapValues& v) {
  HeapValues now = v;
  now.inuse_objects = now.inuse_space = 0;
  Add(key, now);  // the row exists (and holds the stack) from here on
  stratified_.push_back(Stratified{key, stratum, v.inuse_objects, v.inuse_space});
}

void HeapAggregator::CollectSampled(LiveStrata* strata) const {
  for (const Stratified& s : stratified_)
    strata->AddSampled(s.stratum, static_cast<double>(s.objects), static_cast<double>(s.space));
}

void HeapAggregator::ApplyStrata(const LiveStrata& strata) {
  struct Scaled {
    double objects = 0, space = 0;
  };
  std::unordered_map<Key, Scaled, SampleKeyHash> scaled;
  for (const Stratified& s : stratified_) {
    LiveStrata::Factors f = strata.FactorsFor(s.stratum);
    Scaled& row = scaled[s.key];
    row.objects += static_cast<double>(s.objects) * f.objects;
    row.space += static_cast<double>(s.space) * f.bytes;
  }
  stratified_.clear();
  for (const auto& [key, row] : scaled) {
    HeapValues& v = rows_.at(key);  // AddStratified made it
    v.inuse_objects += std::llround(row.objects);
    v.inuse_space += std::llround(row.space);
  }
}

void HeapAggregator::AddFreedTotals(std::unordered_map<SampleKey, HeapValues, SampleKeyHash>&& totals) {
  for (const auto& [key, v] : totals) {
    Add(key, v);
    stacks_.Release(key.stack_id);  // the reference TakeFreedTotals handed over
  }
  totals.clear();
}

void HeapAggregator::ReleaseStacks() {
  for (uint32_t id : retained_stacks_) stacks_.Release(id);
  retained_stacks_.clear();
}

}  // namespace fathom
