#include "heap/heap_rows.h"

#include <algorithm>
#include <cstdio>

namespace fathom {

HeapProfileRowsBuilder::HeapProfileRowsBuilder(const SampleStore& store, const HeapAggregator& aggregator)
    : store_(store), next_(aggregator.rows().begin()), end_(aggregator.rows().end()), copier_(store.stacks()) {
  out_.labels = store.labels_const().strings();
  out_.rows.reserve(aggregator.rows().size());
}

bool HeapProfileRowsBuilder::Step(size_t max_rows) {
  for (size_t n = 0; n < max_rows && next_ != end_; n++, ++next_) {
    const auto& [key, values] = *next_;
    auto [it, inserted] = stack_map_.try_emplace(key.stack_id, static_cast<uint32_t>(out_.stacks.size()));
    if (inserted) {
      out_.stacks.push_back(copier_.Copy(key.stack_id));
      out_.truncated.push_back(store_.stacks().truncated(key.stack_id));
    }
    out_.rows.push_back(HeapProfileRows::Row{it->second, key.class_label, key.thread_label, values, key.label_set});
  }
  return next_ == end_;
}

HeapProfileRows HeapProfileRowsBuilder::Take() {
  out_.symbols = copier_.TakeSymbols();
  return std::move(out_);
}

void HeapProfileRowsBuilder::AddAllocEvents(const std::vector<AllocEvent>& events) {
  out_.allocations.reserve(out_.allocations.size() + events.size());
  for (const AllocEvent& e : events) {
    auto it = stack_map_.find(e.key.stack_id);
    if (it == stack_map_.end()) continue;
    out_.allocations.push_back(
        HeapProfileRows::Allocation{e.time_ns, it->second, e.key.class_label, e.key.thread_label, e.objects, e.bytes});
  }
  std::stable_sort(out_.allocations.begin(), out_.allocations.end(),
                   [](const HeapProfileRows::Allocation& a, const HeapProfileRows::Allocation& b) {
                     return a.time_ns < b.time_ns;
                   });
}

namespace {

// A size class's bounds as "8 KB", "1.25 KB", "640 B".
std::string ClassBytes(uint64_t bytes) {
  static const char* const kUnits[] = {"B", "KB", "MB", "GB", "TB", "PB", "EB"};
  int unit = 0;
  double v = static_cast<double>(bytes);
  while (v >= 1024 && unit < 6) v /= 1024, unit++;
  char buf[32];
  snprintf(buf, sizeof buf, "%.3g %s", v, kUnits[unit]);
  return buf;
}

}  // namespace

void AddUnsampledStrataRows(const LiveStrata& strata, const std::function<std::string(const Stratum&)>& class_name,
                            HeapProfileRows* rows) {
  for (const auto& [stratum, totals] : strata.UnsampledStrata()) {
    std::string name = class_name(stratum);
    FrameSymbol symbol;
    symbol.name = "[not sampled] " + name + " " + ClassBytes(SizeClassStart(stratum.size_class())) + "-" +
                  ClassBytes(SizeClassStart(stratum.size_class() + 1));
    symbol.resolved = true;
    rows->symbols.push_back(symbol);
    rows->stacks.push_back({StackFrame{static_cast<uint32_t>(rows->symbols.size() - 1), 0}});
    rows->truncated.push_back(false);
    rows->labels.push_back(name);
    HeapProfileRows::Row row{static_cast<uint32_t>(rows->stacks.size() - 1), static_cast<uint32_t>(rows->labels.size() - 1),
                             0, HeapValues{}};
    row.values.inuse_objects = static_cast<int64_t>(totals.objects);
    row.values.inuse_space = static_cast<int64_t>(totals.bytes);
    rows->rows.push_back(row);
  }
}

}  // namespace fathom
