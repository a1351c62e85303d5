#include "heap/heap_profile.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "encode/pprof_builder.h"

namespace fathom {

void HeapAggregator::Add(const Key& key, const HeapValues& v) {
  auto [it, inserted] = rows_.try_emplace(key);
  if (inserted) {
    stacks_.Retain(key.stack_id);
    retained_stacks_.push_back(key.stack_id);
  }
  HeapValues& row = it->second;
  row.alloc_objects += v.alloc_objects;
  row.alloc_space += v.alloc_space;
  row.inuse_objects += v.inuse_objects;
  row.inuse_space += v.inuse_space;
  row.alloc_samples += v.alloc_samples;
  row.inuse_samples += v.inuse_samples;
}

void HeapAggregator::AddStratified(const Key& key, const Stratum& stratum, const HeapValues& v) {
  HeapValues now = v;
  now.inuse_objects = now.inuse_space = now.inuse_samples = 0;
  Add(key, now);  // the row exists (and holds the stack) from here on
  stratified_.push_back(Stratified{key, stratum, v.inuse_objects, v.inuse_space, v.inuse_samples});
}

void HeapAggregator::CollectSampled(LiveStrata* strata) const {
  for (const Stratified& s : stratified_)
    strata->AddSampled(s.stratum, static_cast<double>(s.objects), static_cast<double>(s.space));
}

void HeapAggregator::ApplyStrata(const LiveStrata& strata) {
  struct Scaled {
    double objects = 0, space = 0;
    int64_t samples = 0;
  };
  std::unordered_map<Key, Scaled, SampleKeyHash> scaled;
  for (const Stratified& s : stratified_) {
    LiveStrata::Factors f = strata.FactorsFor(s.stratum);
    Scaled& row = scaled[s.key];
    row.objects += static_cast<double>(s.objects) * f.objects;
    row.space += static_cast<double>(s.space) * f.bytes;
    row.samples += s.samples;
  }
  stratified_.clear();
  for (const auto& [key, row] : scaled) {
    HeapValues& v = rows_.at(key);  // AddStratified made it
    v.inuse_objects += std::llround(row.objects);
    v.inuse_space += std::llround(row.space);
    v.inuse_samples += row.samples;
  }
}

void HeapAggregator::AddFreedTotals(std::unordered_map<SampleKey, AllocTotals, SampleKeyHash>&& totals) {
  for (const auto& [key, t] : totals) {
    HeapValues v;
    v.alloc_objects = t.objects;
    v.alloc_space = t.bytes;
    v.alloc_samples = t.samples;
    Add(key, v);
    stacks_.Release(key.stack_id);  // the reference TakeFreedTotals handed over
  }
  totals.clear();
}

void HeapAggregator::ReleaseStacks() {
  for (uint32_t id : retained_stacks_) stacks_.Release(id);
  retained_stacks_.clear();
}

HeapProfileRowsBuilder::HeapProfileRowsBuilder(const SampleStore& store, const HeapAggregator& aggregator)
    : store_(store), next_(aggregator.rows().begin()), end_(aggregator.rows().end()) {
  out_.labels = store.labels_const().strings();
  out_.rows.reserve(aggregator.rows().size());
}

bool HeapProfileRowsBuilder::Step(size_t max_rows) {
  const StackTable& stacks = store_.stacks();
  for (size_t n = 0; n < max_rows && next_ != end_; n++, ++next_) {
    const auto& [key, values] = *next_;
    auto [it, inserted] = stack_map_.try_emplace(key.stack_id, static_cast<uint32_t>(out_.stacks.size()));
    if (inserted) {
      const auto& frames = stacks.frames(key.stack_id);
      const auto& lines = stacks.lines(key.stack_id);
      std::vector<HeapProfileRows::Frame> out(frames.size());
      for (size_t i = 0; i < frames.size(); i++) {
        auto [sym, fresh] = symbol_map_.try_emplace(frames[i], static_cast<uint32_t>(out_.symbols.size()));
        if (fresh) out_.symbols.push_back(stacks.symbol(frames[i]));
        out[i] = HeapProfileRows::Frame{sym->second, lines[i]};
      }
      out_.stacks.push_back(std::move(out));
      out_.truncated.push_back(stacks.truncated(key.stack_id));
    }
    out_.rows.push_back(HeapProfileRows::Row{it->second, key.class_label, key.thread_label, values});
  }
  return next_ == end_;
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
    rows->stacks.push_back({HeapProfileRows::Frame{static_cast<uint32_t>(rows->symbols.size() - 1), 0}});
    rows->truncated.push_back(false);
    rows->labels.push_back(name);
    HeapProfileRows::Row row{static_cast<uint32_t>(rows->stacks.size() - 1), static_cast<uint32_t>(rows->labels.size() - 1),
                             0, HeapValues{}};
    row.values.inuse_objects = static_cast<int64_t>(totals.objects);
    row.values.inuse_space = static_cast<int64_t>(totals.bytes);
    rows->rows.push_back(row);
  }
}

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
    b.add_sample(stack_locations[row.stack], values, labels);
  }
  return b.EncodeGzipped();
}

}  // namespace fathom
