// Heap profile rows: what encoding needs, copied out of the aggregator
// (heap/heap_aggregate.h) and the live tables in batches under the GVL,
// self-contained so that heap_encode.h (pprof) or the combined Firefox
// document can use them with no lock held.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>
#include <vector>

#include "encode/output_stamp.h"
#include "encode/pprof_builder.h"
#include "heap/heap_aggregate.h"
#include "heap/sample_store.h"
#include "heap_census/live_strata.h"
#include "labels/label_sets.h"
#include "stacks/stack_copy.h"

namespace fathom {

// Everything needed to encode, detached from the live tables.
struct HeapProfileRows {
  struct Row {
    uint32_t stack;  // index into stacks
    uint32_t class_label, thread_label;
    HeapValues values;
    uint32_t label_set = 0;  // request labels, an id in label_sets
  };
  std::vector<FrameSymbol> symbols;
  std::vector<std::vector<StackFrame>> stacks;  // leaf first, indexing symbols
  std::vector<bool> truncated;
  std::vector<std::string> labels;  // by label id
  std::vector<Row> rows;
  // Sampled allocations in time order (only when the store kept
  // AllocEvents: the Firefox timeline). stack indexes stacks.
  struct Allocation {
    int64_t time_ns;  // monotonic
    uint32_t stack;
    uint32_t class_label, thread_label;
    int64_t objects, bytes;
  };
  std::vector<Allocation> allocations;
  int64_t start_monotonic_ns = 0;  // the window's start (allocation times count from it)
  int64_t pid = 0;
  int64_t time_nanos = 0;
  int64_t duration_nanos = 0;
  ValueType period_type{"allocations", "count"};
  int64_t sample_period = 1;  // exact mode: every allocation; sampled: the interval in ns
  std::string comment;
  // Sampled mode: what the heap census did to inuse_* (live_strata.h), or
  // why it did not run. Empty: no such line.
  std::string census_comment;
  // Sampled mode: what became of the timer's ticks (tick_accounting.h).
  std::string sampling_comment;
  // Who wrote it (pid, hostname, Ruby, window; core/encode/output_stamp.h),
  // for a profile that leaves the process. pprof output only.
  OutputStamp stamp;
  // The request labels of rows' label_set ids (append-only; labels/); null:
  // rows carry none. No span id: heap rows live across requests, and one
  // per span would be a row per request.
  const LabelSets* label_sets = nullptr;
};

// Copies rows, their stacks, the frames' symbols and the labels, a batch of
// rows at a time so that a caller holding the GVL can yield between batches
// (a profile can have 100k rows). The aggregator must not change meanwhile;
// the stack table may grow (nothing is kept pointing into it across Step
// calls) but the aggregated stacks, which it retains, do not change. All
// frames of those stacks must have been symbolized (FrameSymbol::resolved).
class HeapProfileRowsBuilder {
 public:
  HeapProfileRowsBuilder(const SampleStore& store, const HeapAggregator& aggregator);
  // Copies up to max_rows more rows; returns true once every row is copied.
  bool Step(size_t max_rows);
  // After the last Step: the events whose stacks were copied (an event
  // whose key has no row, such as a record recycled during a yield after
  // the freed totals were taken, is dropped), sorted by time.
  void AddAllocEvents(const std::vector<AllocEvent>& events);
  HeapProfileRows Take();

 private:
  const SampleStore& store_;
  std::unordered_map<SampleKey, HeapValues, SampleKeyHash>::const_iterator next_, end_;
  std::unordered_map<uint32_t, uint32_t> stack_map_;  // stack id -> output stack
  StackCopier copier_;
  HeapProfileRows out_;
};

// Appends one row per census stratum no sample reached (live_strata.h):
// a one-frame stack "[not sampled] String 8 KB-10 KB" holding the
// census's live objects and bytes, with no samples behind them, so that
// live bytes the sampler missed are seen, not left out. class_name names a
// stratum's class (the Ruby layer knows what its ids are); it is also the
// row's class label.
void AddUnsampledStrataRows(const LiveStrata& strata, const std::function<std::string(const Stratum&)>& class_name,
                            HeapProfileRows* rows);

}  // namespace fathom
