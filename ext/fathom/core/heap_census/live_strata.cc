#include "heap_census/live_strata.h"

#include <algorithm>
#include <functional>

namespace fathom {

size_t StratumHash::operator()(const Stratum& s) const {
  return std::hash<uint64_t>()(s.klass * 0x9E3779B97F4A7C15ull ^ s.type_size);
}

Stratum StratumOf(uint64_t klass, uint32_t type, uint64_t bytes) {
  uint32_t k = bytes == 0 ? 0 : 63 - static_cast<uint32_t>(__builtin_clzll(bytes));
  // The two bits below the leading one pick the quarter (none below 4 B).
  uint32_t quarter = k >= 2 ? static_cast<uint32_t>((bytes >> (k - 2)) & 3) : 0;
  Stratum s;
  s.klass = klass;
  s.type_size = ((type & 0xff) << 8) | (4 * k + quarter);
  return s;
}

uint64_t SizeClassStart(uint32_t size_class) {
  uint32_t k = size_class / 4, quarter = size_class % 4;
  if (k >= 64) return UINT64_MAX;
  uint64_t base = uint64_t{1} << k;
  return base + (k >= 2 ? (base >> 2) * quarter : 0);
}

void LiveStrata::AddCensus(const Stratum& stratum, uint64_t bytes) {
  // A heap walk meets runs of one stratum (a page of one class's objects):
  // the last entry saves most hash lookups. unordered_map references stay
  // valid across inserts.
  if (!(last_ && last_stratum_ == stratum)) {
    last_ = &entries_[stratum];
    last_stratum_ = stratum;
  }
  Entry& e = *last_;
  e.census_objects++;
  e.census_bytes += bytes;
}

void LiveStrata::AddSampled(const Stratum& stratum, double objects, double bytes) {
  Entry& e = entries_[stratum];
  e.sampled_objects += objects;
  e.sampled_bytes += bytes;
}

LiveStrata::Factors LiveStrata::FactorsFor(const Stratum& stratum) const {
  Factors f;
  auto it = entries_.find(stratum);
  if (it == entries_.end()) return f;
  const Entry& e = it->second;
  if (e.census_objects == 0) return f;
  if (e.sampled_objects > 0) f.objects = static_cast<double>(e.census_objects) / e.sampled_objects;
  if (e.sampled_bytes > 0) f.bytes = static_cast<double>(e.census_bytes) / e.sampled_bytes;
  return f;
}

LiveStrata::Totals LiveStrata::Census() const {
  Totals t;
  for (const auto& [stratum, e] : entries_) {
    if (e.census_objects == 0) continue;
    t.strata++;
    t.objects += e.census_objects;
    t.bytes += e.census_bytes;
  }
  return t;
}

std::vector<std::pair<Stratum, LiveStrata::Totals>> LiveStrata::UnsampledStrata() const {
  std::vector<std::pair<Stratum, Totals>> out;
  for (const auto& [stratum, e] : entries_)
    if (e.census_objects > 0 && e.sampled_objects <= 0) out.push_back({stratum, Totals{1, e.census_objects, e.census_bytes}});
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  return out;
}

LiveStrata::Totals LiveStrata::Unsampled() const {
  Totals t;
  for (const auto& [stratum, u] : UnsampledStrata()) {
    t.strata++;
    t.objects += u.objects;
    t.bytes += u.bytes;
  }
  return t;
}

std::vector<uint64_t> LiveStrata::CensusClasses() const {
  std::vector<uint64_t> out;
  for (const auto& [stratum, e] : entries_)
    if (e.census_objects > 0) out.push_back(stratum.klass);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

size_t LiveStrata::calibrated_strata() const {
  size_t n = 0;
  for (const auto& [stratum, e] : entries_)
    if (e.census_objects > 0 && e.sampled_objects > 0) n++;
  return n;
}

}  // namespace fathom
