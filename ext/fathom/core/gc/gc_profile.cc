#include "gc/gc_profile.h"

#include <sstream>

#include "encode/pprof_builder.h"

namespace fathom {

std::string GcPauseComment(const PauseHistogram& pauses) {
  std::ostringstream out;
  out << "fathom.gc.pauses count=" << pauses.count() << " total_ns=" << pauses.sum()
      << " max_ns=" << pauses.max() << " p50_ns=" << pauses.Percentile(0.50)
      << " p90_ns=" << pauses.Percentile(0.90) << " p99_ns=" << pauses.Percentile(0.99);
  return out.str();
}

const char* GcSourceName(GcSource source) { return source == GcSource::kCounters ? "counters" : "hooks"; }

std::string GcSourceComment(const GcProfileData& data) {
  std::string out = std::string("fathom.gc.source=") + GcSourceName(data.source);
  if (data.source == GcSource::kCounters) out += " poll_ns=" + std::to_string(data.poll_interval_ns);
  return out;
}

std::string EncodeGcPprof(const GcProfileData& data) {
  PprofBuilder b({{"wall", "nanoseconds"}, {"cpu", "nanoseconds"}, {"gc_steps", "count"}, {"gcs", "count"}},
                 {"wall", "nanoseconds"}, data.flush_interval_ns);
  b.set_default_sample_type("wall");
  b.set_time(data.start_realtime_ns, data.end_monotonic_ns - data.start_monotonic_ns);
  b.add_comment(GcSourceComment(data));
  if (data.source == GcSource::kHooks) b.add_comment(GcPauseComment(data.pauses));
  b.add_comment("fathom.gc.coalesce_ns=" + std::to_string(data.flush_interval_ns));

  // One placeholder frame: GC work is not charged to the stack of whichever
  // thread happened to trigger it (that thread only paid the latency).
  uint64_t function = b.intern_function(kGcFrameName, "", 0);
  std::vector<uint64_t> stack{b.intern_location(function, 0)};
  for (const GcPeriod& p : data.periods) {
    std::vector<Label> labels{Label::String("thread", kGcThreadLabel),
                              Label::String("gc type", GcTypeName(p.type)),
                              Label::String("gc cause", GcCauseName(p.cause))};
    if (p.reason != GcReason::kNone) labels.push_back(Label::String("gc reason", GcReasonName(p.reason)));
    b.add_sample(stack, {p.wall_ns, p.cpu_ns, static_cast<int64_t>(p.steps), static_cast<int64_t>(p.cycles_started)},
                 labels);
  }
  return b.EncodeGzipped();
}

}  // namespace fathom
