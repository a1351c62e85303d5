#include "heap_profile/heap_encode.h"

#include "encode/pprof_builder.h"
#include "labels/label_sets.h"

namespace fathom {

std::string SampleCountComment(const HeapProfileRows& profile) {
  int64_t alloc = 0, inuse = 0;
  for (const HeapProfileRows::Row& row : profile.rows) {
    alloc += row.values.alloc_samples;
    inuse += row.values.inuse_samples;
  }
  return "Samples: " + std::to_string(alloc) + " behind alloc_*, " + std::to_string(inuse) +
         " behind inuse_* (per row: sample types alloc_samples, inuse_samples)";
}

std::string EncodeHeapProfile(const HeapProfileRows& profile) {
  // The *_samples types come last so that positional readers of the first
  // four (-sample_index=0..3, older scripts) are unaffected.
  PprofBuilder b({{"alloc_objects", "count"},
                  {"alloc_space", "bytes"},
                  {"inuse_objects", "count"},
                  {"inuse_space", "bytes"},
                  {kAllocSamplesType, "count"},
                  {kInuseSamplesType, "count"}},
                 profile.period_type, profile.sample_period);
  b.set_default_sample_type("inuse_space");
  b.set_time(profile.time_nanos, profile.duration_nanos);
  if (!profile.comment.empty()) b.add_comment(profile.comment);
  b.add_comment(SampleCountComment(profile));
  if (!profile.census_comment.empty()) b.add_comment(profile.census_comment);
  if (!profile.sampling_comment.empty()) b.add_comment(profile.sampling_comment);
  ApplyOutputStamp(profile.stamp, b);

  // Location ids per output symbol+line are interned by the builder; we
  // only cache the function id per symbol.
  std::vector<uint64_t> function_ids(profile.symbols.size(), 0);
  uint64_t truncated_location = 0;
  std::vector<std::vector<uint64_t>> stack_locations(profile.stacks.size());
  for (size_t s = 0; s < profile.stacks.size(); s++) {
    std::vector<uint64_t>& locs = stack_locations[s];
    locs.reserve(profile.stacks[s].size() + 1);
    for (const HeapProfileRows::Frame& f : profile.stacks[s]) {
      uint64_t& fn = function_ids[f.symbol];
      if (fn == 0) {
        const FrameSymbol& sym = profile.symbols[f.symbol];
        fn = b.intern_function(sym.name, sym.filename, sym.first_line);
      }
      locs.push_back(b.intern_location(fn, f.line));
    }
    if (profile.truncated[s]) {
      if (truncated_location == 0)
        truncated_location = b.intern_location(b.intern_function(kTruncatedFrameName, "", 0), 0);
      locs.push_back(truncated_location);  // root end: stacks are leaf first
    }
  }

  std::vector<int64_t> values(6);
  for (const HeapProfileRows::Row& row : profile.rows) {
    values[0] = row.values.alloc_objects;
    values[1] = row.values.alloc_space;
    values[2] = row.values.inuse_objects;
    values[3] = row.values.inuse_space;
    values[4] = row.values.alloc_samples;
    values[5] = row.values.inuse_samples;
    std::vector<Label> labels;
    labels.push_back(Label::String("class", profile.labels[row.class_label]));
    if (row.thread_label != 0) labels.push_back(Label::String("thread", profile.labels[row.thread_label]));
    AddRequestLabels(profile.label_sets, row.label_set, 0, &labels);
    b.add_sample(stack_locations[row.stack], values, labels);
  }
  return b.EncodeGzipped();
}

}  // namespace fathom
