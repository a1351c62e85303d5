#include "heap/heap_encode.h"

#include "encode/pprof_builder.h"
#include "labels/label_sets.h"
#include "stacks/pprof_locations.h"

namespace fathom {

std::string EncodeHeapProfile(const HeapProfileRows& profile) {
  PprofBuilder b(SampleTypes<HeapValues>(), profile.period_type, profile.sample_period);
  b.set_default_sample_type(kHeapDefaultSampleType);
  b.set_time(profile.time_nanos, profile.duration_nanos);
  if (!profile.comment.empty()) b.add_comment(profile.comment);
  HeapValues totals;
  for (const HeapProfileRows::Row& row : profile.rows) AddValues(&totals, row.values);
  std::string counts = SampleCountComment(totals);
  if (!counts.empty()) b.add_comment(counts);
  if (!profile.census_comment.empty()) b.add_comment(profile.census_comment);
  if (!profile.sampling_comment.empty()) b.add_comment(profile.sampling_comment);
  ApplyOutputStamp(profile.stamp, b);

  PprofLocations locations(b, &profile.symbols);
  std::vector<std::vector<uint64_t>> stack_locations(profile.stacks.size());
  for (size_t s = 0; s < profile.stacks.size(); s++) {
    stack_locations[s].reserve(profile.stacks[s].size() + 1);
    locations.Append(profile.stacks[s], profile.truncated[s], &stack_locations[s]);
  }

  std::vector<int64_t> values;
  for (const HeapProfileRows::Row& row : profile.rows) {
    AppendValues(row.values, &values);
    std::vector<Label> labels;
    labels.push_back(Label::String("class", profile.labels[row.class_label]));
    if (row.thread_label != 0) labels.push_back(Label::String("thread", profile.labels[row.thread_label]));
    AddRequestLabels(profile.label_sets, row.label_set, 0, &labels);
    b.add_sample(stack_locations[row.stack], values, labels);
  }
  return b.EncodeGzipped();
}

}  // namespace fathom
