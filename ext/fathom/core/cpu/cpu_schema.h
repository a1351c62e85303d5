// What a CPU/wall sample carries, each part defined once:
//
//  - CpuValues, the profile's values and their schema
//    (encode/sample_schema.h): what a drained sample is accounted as
//    (AccountedParts, sample_ring.h), how the aggregate adds samples up
//    per row, and the sample types the encoder writes, in this order;
//  - CpuLabels, the labels the SIGPROF handler records into the sample's
//    header (ruby/cpu/cpu_sampler.cc), which the aggregate keys its rows by
//    beside the stack, thread and state (CpuKey), which a row carries
//    whole, and which the encoder writes as pprof labels (AppendPprofLabels).
//
// A new label: a field of CpuLabels, its entry in Fields(), its pprof label
// in AppendPprofLabels, its value where the handler records it
// (ruby/cpu/sample_labels.h, ReadLabels), and its row in docs/formats.md.
// A new value: a field of CpuValues, a line of its schema, and its value in
// AccountedParts.
#pragma once

#include <cstddef>
#include <cstdint>
#include <tuple>
#include <vector>

#include "base/hash_util.h"
#include "encode/sample_schema.h"
#include "labels/label_sets.h"

namespace fathom {

struct CpuValues {
  // Samples taken, and the thread's CPU and wall time they stand for.
  int64_t samples = 0, cpu_ns = 0, wall_ns = 0;

  static constexpr SampleField<CpuValues> kSchema[] = {
      {"samples", "count", &CpuValues::samples},
      {"cpu", "nanoseconds", &CpuValues::cpu_ns},
      {"wall", "nanoseconds", &CpuValues::wall_ns},
  };
};

// Plain integers, copied by the signal handler: no pointer, nothing to free.
struct CpuLabels {
  uint32_t label_set = 0;  // the thread's request labels: a LabelSets id (labels/label_sets.h); 0: none
  uint64_t span_id = 0;    // the thread's span id; 0: none

  // Every field, for comparing and hashing keys.
  auto Fields() const { return std::tie(label_set, span_id); }
};

inline bool operator==(const CpuLabels& a, const CpuLabels& b) { return a.Fields() == b.Fields(); }

inline uint64_t HashOf(const CpuLabels& labels) {
  uint64_t h = 0;
  std::apply([&h](const auto&... field) { ((h = HashCombine(h, static_cast<uint64_t>(field))), ...); },
             labels.Fields());
  return h;
}

// The sample's labels as pprof labels: the request labels' pairs from sets
// (none if sets is null) and "span_id" (16 lowercase hex digits) when it
// has one.
inline void AppendPprofLabels(const CpuLabels& labels, const LabelSets* sets, std::vector<Label>* out) {
  AddRequestLabels(sets, labels.label_set, labels.span_id, out);
}

}  // namespace fathom
