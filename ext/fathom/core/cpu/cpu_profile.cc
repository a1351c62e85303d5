#include "cpu/cpu_profile.h"

#include "encode/pprof_builder.h"
#include "stacks/pprof_locations.h"

namespace fathom {

const char* CpuModeName(CpuMode mode) { return mode == CpuMode::kWall ? "wall" : "cpu"; }

std::string EncodeCpuPprof(const CpuProfileData& data) {
  const char* mode = CpuModeName(data.mode);
  PprofBuilder b(SampleTypes<CpuValues>(), {mode, "nanoseconds"}, data.interval_ns);
  b.set_default_sample_type(mode);
  b.set_time(data.start_realtime_ns, data.duration_ns);
  b.add_comment(std::string("fathom.cpu.mode=") + mode + " interval_ns=" + std::to_string(data.interval_ns) +
                " dropped=" + std::to_string(data.dropped) + " states=" + data.state_source);
  ApplyOutputStamp(data.stamp, b);

  PprofLocations locations(b, &data.symbols);
  std::vector<uint64_t> locs;
  std::vector<int64_t> values;
  for (const CpuProfileData::Row& row : data.rows) {
    locs.clear();
    locations.Append(row.stack, row.truncated, &locs);
    if (locs.empty()) {
      // No walk while a GC runs (cpu_sampler.cc): the GVL holder was in the
      // GC; another thread's stack was not read for this sample.
      locs.push_back(locations.Named(row.state == ThreadState::kGc ? kCpuGcFrameName : kCpuNoStackFrameName));
    }
    auto name = data.thread_names.find(row.thread_id);
    std::vector<Label> labels{Label::Number("thread id", row.thread_id),
                              Label::String("thread name", name == data.thread_names.end() ? "" : name->second),
                              Label::String("state", ThreadStateName(row.state))};
    // On a CPU with the GVL released: still "running", told apart by this.
    if (row.state == ThreadState::kNoGvl) labels.push_back(Label::String("gvl", "released"));
    AppendPprofLabels(row.labels, data.label_sets, &labels);
    AppendValues(row.values, &values);
    b.add_sample(locs, values, labels);
  }
  return b.EncodeGzipped();
}

}  // namespace fathom
