#include "gc/gc_profile.h"

#include <sstream>

#include "encode/pprof_builder.h"
#include "stacks/pprof_locations.h"

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

namespace {

// One placeholder frame: GC work is not charged to the stack of whichever
// thread happened to trigger it (that thread only paid the latency).
std::vector<uint64_t> GcStack(PprofBuilder& b) { return {PprofLocations(b).Named(kGcFrameName)}; }

std::vector<Label> GcLabels(GcType type, GcReason reason, GcCause cause) {
  std::vector<Label> labels{Label::String("thread", kGcThreadLabel), Label::String("gc type", GcTypeName(type)),
                            Label::String("gc cause", GcCauseName(cause))};
  if (reason != GcReason::kNone) labels.push_back(Label::String("gc reason", GcReasonName(reason)));
  return labels;
}

// Hooks: every step measured, so wall time (the default), CPU time and steps.
std::string EncodeHooksPprof(const GcProfileData& data) {
  PprofBuilder b({{"wall", "nanoseconds"}, {"cpu", "nanoseconds"}, {"gc_steps", "count"}, {"gcs", "count"}},
                 {"wall", "nanoseconds"}, data.flush_interval_ns);
  b.set_default_sample_type("wall");
  b.set_time(data.start_realtime_ns, data.end_monotonic_ns - data.start_monotonic_ns);
  b.add_comment(GcSourceComment(data));
  b.add_comment(GcPauseComment(data.pauses));
  b.add_comment("fathom.gc.coalesce_ns=" + std::to_string(data.flush_interval_ns));
  ApplyOutputStamp(data.stamp, b);
  std::vector<uint64_t> stack = GcStack(b);
  for (const GcPeriod& p : data.periods) {
    b.add_sample(stack, {p.wall_ns, p.cpu_ns, static_cast<int64_t>(p.steps), static_cast<int64_t>(p.cycles_started)},
                 GcLabels(p.type, p.reason, p.cause));
  }
  return b.EncodeGzipped();
}

// Counters: only what GC.stat measured. cpu is GC.stat(:time) (process CPU
// time in GC); no wall or gc_steps column, since a column of zeros would
// read as "no time" rather than "not measured". Period 0: the reads are
// wall-clock apart, and a cpu period would claim one sample per N ns of
// CPU; the poll interval is in the source comment.
//
// A read's period holds GCs of both types but one set of labels (the
// latest GC's): the latest type's GCs get the read's time and labels, the
// other type's their count, no time and the cause "unseen", so counts by
// "gc type" stay exact (the report explains the unseen rows).
std::string EncodeCountersPprof(const GcProfileData& data) {
  PprofBuilder b({{"cpu", "nanoseconds"}, {"gcs", "count"}}, {"cpu", "nanoseconds"}, 0);
  b.set_default_sample_type("cpu");
  b.set_time(data.start_realtime_ns, data.end_monotonic_ns - data.start_monotonic_ns);
  b.add_comment(GcSourceComment(data));
  b.add_comment("fathom.gc.coalesce_ns=" + std::to_string(data.flush_interval_ns));
  ApplyOutputStamp(data.stamp, b);
  std::vector<uint64_t> stack = GcStack(b);
  for (const GcPeriod& p : data.periods) {
    bool major = p.type == GcType::kMajor;
    uint32_t latest = major ? p.major_gcs : p.minor_gcs;
    uint32_t other = major ? p.minor_gcs : p.major_gcs;
    if (latest > 0 || p.cpu_ns > 0)
      b.add_sample(stack, {p.cpu_ns, static_cast<int64_t>(latest)}, GcLabels(p.type, p.reason, p.cause));
    if (other > 0)
      b.add_sample(stack, {0, static_cast<int64_t>(other)},
                   GcLabels(major ? GcType::kMinor : GcType::kMajor, GcReason::kNone, GcCause::kUnseen));
  }
  return b.EncodeGzipped();
}

}  // namespace

std::string EncodeGcPprof(const GcProfileData& data) {
  return data.source == GcSource::kCounters ? EncodeCountersPprof(data) : EncodeHooksPprof(data);
}

}  // namespace fathom
