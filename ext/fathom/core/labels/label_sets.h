// LabelSets: the process's interned request-label sets ("endpoint" =
// "UsersController#show", ...), each named by a small integer id that a
// thread publishes for its samplers (the SIGPROF handler, the heap NEWOBJ
// hook) to copy into a sample. Pure C++17.
//
// Id 0 is the empty set. The table is append-only and fixed in size from
// construction: entries live in one preallocated array, an entry is written
// before the count that makes its id valid is published (release), and is
// never changed or freed afterwards. So an id a sample carries never
// dangles, and an encoder may read an entry (Get) from any thread, without
// a lock, while another thread interns.
//
// The number of distinct sets is bounded (max_sets, excluding the empty
// set): a label value built from a raw path with ids would otherwise grow
// the table, and a backend's series count, without limit. Past the bound a
// new set is recorded as its keys with every value "(other)" (so
// `-tagfocus endpoint=(other)` finds what overflowed, and slicing by a key
// still puts it under that key), itself interned in a small reserve of
// kOverflowSets sets; once that is full too, as the one set
// fathom_labels="(other)" (kOverflowId). Each overflowed Intern is counted
// in overflowed().
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "encode/pprof_builder.h"  // Label

namespace fathom {

using LabelPairs = std::vector<std::pair<std::string, std::string>>;

class LabelSets {
 public:
  static constexpr uint32_t kEmptyId = 0;
  static constexpr uint32_t kOverflowId = 1;
  static constexpr const char* kOverflowKey = "fathom_labels";
  static constexpr const char* kOverflowValue = "(other)";
  static constexpr size_t kDefaultMaxSets = 1024;
  static constexpr size_t kOverflowSets = 32;

  // max_sets: distinct non-empty sets kept (at least 1).
  explicit LabelSets(size_t max_sets = kDefaultMaxSets);
  LabelSets(const LabelSets&) = delete;
  LabelSets& operator=(const LabelSets&) = delete;

  // The id of this set of (key, value) pairs, interning it on first use.
  // Pairs are sorted by key (the caller has rejected duplicate keys), so
  // the same labels given in another order are the same set. Empty: 0.
  // Past the bound: kOverflowId (and overflowed() counts the call).
  // Thread-safe (a mutex; never called from a signal handler).
  uint32_t Intern(LabelPairs pairs);

  // The pairs of a published id, sorted by key; an id never returned by
  // Intern gives the empty set. Lock-free; the reference stays valid for
  // the table's life.
  const LabelPairs& Get(uint32_t id) const;

  // Distinct non-empty sets interned within the bound (overflow sets not counted).
  size_t size() const;
  size_t max_sets() const { return max_sets_; }
  // Intern calls that got kOverflowId because the table was full.
  uint64_t overflowed() const { return overflowed_.load(std::memory_order_relaxed); }

  // The process's table (the Ruby binding's; lives until exit).
  static LabelSets& Global();

 private:
  size_t max_sets_;
  // entries_[0]: empty, [1]: fathom_labels=(other), then up to max_sets_
  // interned sets and kOverflowSets "(other)" sets, in interning order.
  std::unique_ptr<LabelPairs[]> entries_;
  std::atomic<uint32_t> count_{2};  // ids below are published
  std::atomic<uint64_t> overflowed_{0};
  size_t interned_ = 0, overflow_sets_ = 0;  // under mutex_
  mutable std::mutex mutex_;
  std::unordered_map<std::string, uint32_t> index_;  // encoded pairs -> id; under mutex_
};

// A span id as Pyroscope links spans to profiles: the pprof string label
// "span_id" with 16 lowercase hex digits (0 is no span, never written).
inline constexpr const char* kSpanIdLabel = "span_id";
std::string SpanIdHex(uint64_t span_id);

// Appends a sample's request labels (label_set's pairs from sets; none if
// sets is null or the id is 0) and its span_id label (if span_id != 0), as
// pprof string labels. Used by the CPU/wall and heap encoders.
void AddRequestLabels(const LabelSets* sets, uint32_t label_set, uint64_t span_id, std::vector<Label>* labels);

}  // namespace fathom
