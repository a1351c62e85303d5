#include "heap_profile.h"

#include "pprof_builder.h"

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
}

void HeapAggregator::AddFreedTotals(std::unordered_map<SampleKey, AllocTotals, SampleKeyHash>&& totals) {
  for (const auto& [key, t] : totals) {
    HeapValues v;
    v.alloc_objects = t.objects;
    v.alloc_space = t.bytes;
    Add(key, v);
    stacks_.Release(key.stack_id);  // the reference TakeFreedTotals handed over
  }
  totals.clear();
}

void HeapAggregator::ReleaseStacks() {
  for (uint32_t id : retained_stacks_) stacks_.Release(id);
  retained_stacks_.clear();
}

HeapSnapshot MakeHeapSnapshot(const SampleStore& store, const HeapAggregator& aggregator) {
  const StackTable& stacks = store.stacks();
  HeapSnapshot snap;
  snap.labels = store.labels_const().strings();
  std::unordered_map<uint32_t, uint32_t> stack_map;   // stack id -> snapshot stack
  std::unordered_map<uint32_t, uint32_t> symbol_map;  // frame index -> snapshot symbol
  snap.rows.reserve(aggregator.rows().size());
  for (const auto& [key, values] : aggregator.rows()) {
    auto [it, inserted] = stack_map.try_emplace(key.stack_id, static_cast<uint32_t>(snap.stacks.size()));
    if (inserted) {
      const auto& frames = stacks.frames(key.stack_id);
      const auto& lines = stacks.lines(key.stack_id);
      std::vector<HeapSnapshot::Frame> out(frames.size());
      for (size_t i = 0; i < frames.size(); i++) {
        auto [sym, fresh] = symbol_map.try_emplace(frames[i], static_cast<uint32_t>(snap.symbols.size()));
        if (fresh) snap.symbols.push_back(stacks.symbol(frames[i]));
        out[i] = HeapSnapshot::Frame{sym->second, lines[i]};
      }
      snap.stacks.push_back(std::move(out));
      snap.truncated.push_back(stacks.truncated(key.stack_id));
    }
    snap.rows.push_back(HeapSnapshot::Row{it->second, key.class_label, key.thread_label, values});
  }
  return snap;
}

std::string EncodeHeapProfile(const HeapSnapshot& snap) {
  PprofBuilder b({{"alloc_objects", "count"}, {"alloc_space", "bytes"}, {"inuse_objects", "count"}, {"inuse_space", "bytes"}},
                 snap.period_type, snap.sample_period);
  b.set_default_sample_type("inuse_space");
  b.set_time(snap.time_nanos, snap.duration_nanos);
  if (!snap.comment.empty()) b.add_comment(snap.comment);

  // Location ids per snapshot symbol+line are interned by the builder; we
  // only cache the function id per symbol.
  std::vector<uint64_t> function_ids(snap.symbols.size(), 0);
  uint64_t truncated_location = 0;
  std::vector<std::vector<uint64_t>> stack_locations(snap.stacks.size());
  for (size_t s = 0; s < snap.stacks.size(); s++) {
    std::vector<uint64_t>& locs = stack_locations[s];
    locs.reserve(snap.stacks[s].size() + 1);
    for (const HeapSnapshot::Frame& f : snap.stacks[s]) {
      uint64_t& fn = function_ids[f.symbol];
      if (fn == 0) {
        const FrameSymbol& sym = snap.symbols[f.symbol];
        fn = b.intern_function(sym.name, sym.name, sym.filename, sym.first_line);
      }
      locs.push_back(b.intern_location(fn, f.line));
    }
    if (snap.truncated[s]) {
      if (truncated_location == 0)
        truncated_location = b.intern_location(b.intern_function(kTruncatedFrameName, kTruncatedFrameName, "", 0), 0);
      locs.push_back(truncated_location);  // root end: stacks are leaf first
    }
  }

  std::vector<int64_t> values(4);
  for (const HeapSnapshot::Row& row : snap.rows) {
    values[0] = row.values.alloc_objects;
    values[1] = row.values.alloc_space;
    values[2] = row.values.inuse_objects;
    values[3] = row.values.inuse_space;
    std::vector<Label> labels;
    labels.push_back(Label::String("class", snap.labels[row.class_label]));
    if (row.thread_label != 0) labels.push_back(Label::String("thread", snap.labels[row.thread_label]));
    b.add_sample(stack_locations[row.stack], values, labels);
  }
  return b.EncodeGzipped();
}

}  // namespace fathom
