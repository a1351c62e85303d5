// A profile's values, described once. Each profile kind has one value type
// (HeapValues, CpuValues: a struct of int64_t fields) whose schema lists,
// for every field, the pprof sample type it is written as (name and unit),
// how two values of one row add up, and, for a count of the sample records
// behind estimates, which estimates it stands behind:
//
//   struct CpuValues {
//     int64_t samples = 0, cpu_ns = 0;
//     static constexpr SampleField<CpuValues> kSchema[] = {
//         {"samples", "count", &CpuValues::samples}, {"cpu", "nanoseconds", &CpuValues::cpu_ns}};
//   };
//
// The sampler fills the fields by name, the aggregator adds rows up with
// AddValues, and the encoder names them with SampleTypes and writes them
// with AppendValues, in the schema's order. A new value is a field and a
// line of its schema: no code copies the fields one by one, and no value is
// named by its position.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "encode/pprof_builder.h"  // ValueType, Combine

namespace fathom {

template <typename Values>
struct SampleField {
  const char* type;  // the pprof sample type, e.g. "alloc_space"
  const char* unit;  // "count", "bytes", "nanoseconds"
  int64_t Values::*value;
  Combine combine = Combine::kSum;
  // A count of the sample records that stand behind estimates: the prefix
  // of the sample types it stands behind ("alloc_" for alloc_objects and
  // alloc_space), nullptr for any other value. Its own name must be that
  // prefix and "samples" (CountsNamedForWhatTheyCount): `fathom report`
  // finds the count behind a type by that name in the profile
  // (lib/fathom/report/sample_interval.rb), and the profile's comment says
  // so too (SampleCountComment).
  const char* counts = nullptr;
};

// Whether every count in Values' schema is named for the types it counts
// (SampleField::counts): "alloc_samples" for "alloc_". For a static_assert
// beside the schema.
template <typename Values>
constexpr bool CountsNamedForWhatTheyCount() {
  for (const SampleField<Values>& f : Values::kSchema) {
    if (f.counts == nullptr) continue;
    const char* t = f.type;
    for (const char* p = f.counts; *p != '\0'; p++, t++)
      if (*t != *p) return false;
    for (const char* p = "samples"; *p != '\0'; p++, t++)
      if (*t != *p) return false;
    if (*t != '\0') return false;
  }
  return true;
}

// The sample types of Values, in its schema's order (PprofBuilder's).
template <typename Values>
std::vector<ValueType> SampleTypes() {
  std::vector<ValueType> types;
  for (const SampleField<Values>& f : Values::kSchema) types.push_back(ValueType{f.type, f.unit, f.combine});
  return types;
}

// into += from, each field as its schema says (summed, or the larger kept).
template <typename Values>
void AddValues(Values* into, const Values& from) {
  for (const SampleField<Values>& f : Values::kSchema) {
    int64_t& to = into->*f.value;
    const int64_t v = from.*f.value;
    if (f.combine == Combine::kMax) {
      if (v > to) to = v;
    } else {
      to += v;
    }
  }
}

// The values in the schema's order, for PprofBuilder::add_sample (out is
// reused from sample to sample).
template <typename Values>
void AppendValues(const Values& values, std::vector<int64_t>* out) {
  out->clear();
  for (const SampleField<Values>& f : Values::kSchema) out->push_back(values.*f.value);
}

// "Samples: 12 behind alloc_*, 7 behind inuse_* (per row: sample types
// alloc_samples, inuse_samples)": the records behind the estimates of a
// whole profile (totals: its rows added up), per count of the schema (the
// fields with `counts`); "" for a schema without counts.
template <typename Values>
std::string SampleCountComment(const Values& totals) {
  std::string behind, types;
  for (const SampleField<Values>& f : Values::kSchema) {
    if (f.counts == nullptr) continue;
    behind += (behind.empty() ? "" : ", ") + std::to_string(totals.*f.value) + " behind " + f.counts + "*";
    types += (types.empty() ? "" : ", ") + std::string(f.type);
  }
  return behind.empty() ? "" : "Samples: " + behind + " (per row: sample types " + types + ")";
}

}  // namespace fathom
