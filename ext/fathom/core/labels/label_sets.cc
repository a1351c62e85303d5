#include "labels/label_sets.h"

#include <algorithm>

namespace fathom {

namespace {

// One string per set for the index: each key and value with its length
// first, so no separator can be forged by a value.
std::string EncodeKey(const LabelPairs& pairs) {
  std::string out;
  for (const auto& [k, v] : pairs) {
    out += std::to_string(k.size()) + ':' + k + std::to_string(v.size()) + ':' + v;
  }
  return out;
}

}  // namespace

LabelSets::LabelSets(size_t max_sets)
    : max_sets_(max_sets < 1 ? 1 : max_sets), entries_(new LabelPairs[2 + max_sets_ + kOverflowSets]) {
  entries_[kOverflowId] = LabelPairs{{kOverflowKey, kOverflowValue}};
}

uint32_t LabelSets::Intern(LabelPairs pairs) {
  if (pairs.empty()) return kEmptyId;
  std::sort(pairs.begin(), pairs.end());
  std::string key = EncodeKey(pairs);
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = index_.find(key);
  if (it != index_.end()) return it->second;
  uint32_t next = count_.load(std::memory_order_relaxed);
  if (interned_ < max_sets_) {
    interned_++;
  } else {
    overflowed_.fetch_add(1, std::memory_order_relaxed);
    for (auto& kv : pairs) kv.second = kOverflowValue;
    key = EncodeKey(pairs);
    it = index_.find(key);
    if (it != index_.end()) return it->second;
    if (overflow_sets_ >= kOverflowSets) return kOverflowId;
    overflow_sets_++;
  }
  // Written before the count that publishes it: a reader that sees the id
  // valid (acquire in Get) sees the whole entry.
  entries_[next] = std::move(pairs);
  index_.emplace(std::move(key), next);
  count_.store(next + 1, std::memory_order_release);
  return next;
}

const LabelPairs& LabelSets::Get(uint32_t id) const {
  if (id >= count_.load(std::memory_order_acquire)) return entries_[kEmptyId];
  return entries_[id];
}

size_t LabelSets::size() const {
  // interned_ is guarded by the mutex; this is a statistic, read under it.
  std::lock_guard<std::mutex> lock(mutex_);
  return interned_;
}

std::string SpanIdHex(uint64_t span_id) {
  static const char kDigits[] = "0123456789abcdef";
  std::string out(16, '0');
  for (int i = 15; i >= 0; i--, span_id >>= 4) out[i] = kDigits[span_id & 0xf];
  return out;
}

void AddRequestLabels(const LabelSets* sets, uint32_t label_set, uint64_t span_id, std::vector<Label>* labels) {
  if (sets != nullptr && label_set != LabelSets::kEmptyId)
    for (const auto& [key, value] : sets->Get(label_set)) labels->push_back(Label::String(key, value));
  if (span_id != 0) labels->push_back(Label::String(kSpanIdLabel, SpanIdHex(span_id)));
}

LabelSets& LabelSets::Global() {
  // Never destroyed: a sampler may read it while the process exits.
  static LabelSets* table = new LabelSets();
  return *table;
}

}  // namespace fathom
