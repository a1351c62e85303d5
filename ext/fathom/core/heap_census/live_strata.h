// LiveStrata: post-stratification of the sampled in-use estimate against a
// heap census.
//
// The sampled estimate of a site's live bytes rests on how many of its
// objects the sampler happened to see survive; for big objects that rarely
// survive that is a handful, and the estimate swings by tens of percent.
// At flush Ruby's heap can be walked: the census gives, per stratum (an
// object's class, type and size class), the exact count and bytes of
// the live objects certainly allocated in the window (SlotOccupancy). The
// sampled live records of the same strata split those exact totals among
// their sites in proportion to their Horvitz-Thompson estimates:
//
//   site's live bytes = Σ_h  census_bytes(h) · est(site, h) / est(all, h)
//
// the classic post-stratified (ratio) estimator: consistent, with a bias
// of order 1/n_h, and a variance that comes only from how the sample
// splits each stratum among sites, not from how many of the stratum's
// objects it saw. A stratum alone to one site (the 10 KB strings of
// bench/accuracy.rb, the instances of a class only one site creates) is
// exact from its first live sample. Records whose
// objects are not certainly new (ambiguous slots) keep their plain
// estimate; a stratum the census found but no sample reached is reported
// as unattributed (Unsampled), not spread over other strata.
// docs/internals/heap.md "Calibrating live bytes to a heap census".
#pragma once

#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <utility>
#include <vector>

namespace fathom {

// A census stratum: the object's class (an opaque id: the Ruby layer's
// VALUE of rb_obj_class), its Ruby type number and its size class. Size
// classes are quarter octaves: class 4k+j holds [2^k·(1+j/4), 2^k·(1+(j+1)/4))
// bytes, each ~19-25% wide, so sites allocating sizes more than about a
// fifth apart rarely share one. A default Stratum is "none": the record
// keeps its plain estimate.
struct Stratum {
  uint64_t klass = 0;
  uint32_t type_size = UINT32_MAX;
  bool valid() const { return type_size != UINT32_MAX; }
  bool operator==(const Stratum& o) const { return klass == o.klass && type_size == o.type_size; }
  bool operator<(const Stratum& o) const { return klass != o.klass ? klass < o.klass : type_size < o.type_size; }
  uint32_t type() const { return type_size >> 8; }
  uint32_t size_class() const { return type_size & 0xff; }
};
struct StratumHash {
  size_t operator()(const Stratum& s) const;
};
Stratum StratumOf(uint64_t klass, uint32_t type, uint64_t bytes);
// The bytes a size class starts at (its end is the next class's start).
uint64_t SizeClassStart(uint32_t size_class);

class LiveStrata {
 public:
  LiveStrata() = default;
  // Moves drop AddCensus's cached entry (it points into a map).
  LiveStrata(LiveStrata&& o) noexcept : entries_(std::move(o.entries_)) { o.last_ = nullptr; }
  LiveStrata& operator=(LiveStrata&& o) noexcept {
    entries_ = std::move(o.entries_);
    last_ = o.last_ = nullptr;
    return *this;
  }
  LiveStrata(const LiveStrata&) = delete;
  LiveStrata& operator=(const LiveStrata&) = delete;

  // One live object of the census (certainly allocated in the window).
  void AddCensus(const Stratum& stratum, uint64_t bytes);
  // A sampled live record's weighted estimate.
  void AddSampled(const Stratum& stratum, double objects, double bytes);

  // What the stratum's sampled estimates are multiplied by: census over
  // estimate, or 1 where either side is empty (no calibration possible).
  struct Factors {
    double objects = 1.0;
    double bytes = 1.0;
  };
  Factors FactorsFor(const Stratum& stratum) const;

  struct Totals {
    uint64_t strata = 0;
    uint64_t objects = 0;
    uint64_t bytes = 0;
  };
  // Census strata without a sampled live record, in Stratum order.
  std::vector<std::pair<Stratum, Totals>> UnsampledStrata() const;
  Totals Census() const;    // everything the census counted
  Totals Unsampled() const; // census strata without a sampled live record
  size_t calibrated_strata() const;  // strata with both sides
  // The distinct class ids of the census, sorted.
  std::vector<uint64_t> CensusClasses() const;

  bool empty() const { return entries_.empty(); }

 private:
  struct Entry {
    uint64_t census_objects = 0;
    uint64_t census_bytes = 0;
    double sampled_objects = 0;
    double sampled_bytes = 0;
  };
  std::unordered_map<Stratum, Entry, StratumHash> entries_;
  Entry* last_ = nullptr;  // AddCensus's last entry
  Stratum last_stratum_;
};

}  // namespace fathom
