#include "heap/heap_encode.h"

#include "encode/pprof_builder.h"
#include "labels/label_sets.h"
#include "stacks/pprof_locations.h"

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

  PprofLocations locations(b, &profile.symbols);
  std::vector<std::vector<uint64_t>> stack_locations(profile.stacks.size());
  for (size_t s = 0; s < profile.stacks.size(); s++) {
    stack_locations[s].reserve(profile.stacks[s].size() + 1);
    locations.Append(profile.stacks[s], profile.truncated[s], &stack_locations[s]);
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
