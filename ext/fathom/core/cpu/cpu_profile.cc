#include "cpu/cpu_profile.h"

#include "encode/pprof_builder.h"
#include "stacks/frames.h"

namespace fathom {

const char* CpuModeName(CpuMode mode) { return mode == CpuMode::kWall ? "wall" : "cpu"; }

std::string EncodeCpuPprof(const CpuProfileData& data) {
  const char* mode = CpuModeName(data.mode);
  PprofBuilder b({{"samples", "count"}, {"cpu", "nanoseconds"}, {"wall", "nanoseconds"}}, {mode, "nanoseconds"},
                 data.interval_ns);
  b.set_default_sample_type(mode);
  b.set_time(data.start_realtime_ns, data.duration_ns);
  b.add_comment(std::string("fathom.cpu.mode=") + mode + " interval_ns=" + std::to_string(data.interval_ns) +
                " dropped=" + std::to_string(data.dropped) + " states=" + data.state_source);
  ApplyOutputStamp(data.stamp, b);

  std::vector<uint64_t> functions(data.symbols.size(), 0);
  uint64_t truncated_location = 0;
  std::vector<uint64_t> locs;
  for (const CpuProfileData::Row& row : data.rows) {
    locs.clear();
    for (size_t i = 0; i < row.frames.size(); i++) {
      uint32_t f = row.frames[i];
      if (f >= functions.size()) continue;
      if (functions[f] == 0) {
        const FrameSymbol& sym = data.symbols[f];
        functions[f] = b.intern_function(sym.name, sym.filename, sym.first_line);
      }
      locs.push_back(b.intern_location(functions[f], i < row.lines.size() ? row.lines[i] : 0));
    }
    if (locs.empty()) {
      // No walk while a GC runs (cpu_sampler.cc): the GVL holder was in the
      // GC; another thread's stack was not read for this sample.
      const char* name = row.state == ThreadState::kGc ? kCpuGcFrameName : kCpuNoStackFrameName;
      locs.push_back(b.intern_location(b.intern_function(name, "", 0), 0));
    }
    if (row.truncated) {
      if (truncated_location == 0)
        truncated_location = b.intern_location(b.intern_function(kTruncatedFrameName, "", 0), 0);
      locs.push_back(truncated_location);  // root end: stacks are leaf first
    }
    auto name = data.thread_names.find(row.thread_id);
    std::vector<Label> labels{Label::Number("thread id", row.thread_id),
                              Label::String("thread name", name == data.thread_names.end() ? "" : name->second),
                              Label::String("state", ThreadStateName(row.state))};
    // On a CPU with the GVL released: still "running", told apart by this.
    if (row.state == ThreadState::kNoGvl) labels.push_back(Label::String("gvl", "released"));
    AddRequestLabels(data.label_sets, row.label_set, row.span_id, &labels);
    b.add_sample(locs, {row.values.samples, row.values.cpu_ns, row.values.wall_ns}, labels);
  }
  return b.EncodeGzipped();
}

}  // namespace fathom
