#include "gc/firefox_gc_track.h"

#include <string>

#include "encode/firefox_profile.h"
#include "encode/gzip.h"

namespace fathom {

namespace {

double Ms(int64_t ns) { return static_cast<double>(ns) / 1e6; }

}  // namespace

// One track, "Garbage Collection":
//  - an interval marker "Minor GC"/"Major GC" per period, from the start of
//    its first step to the end of its last. A coalesced period can span
//    mutator time between its steps; its fields say how much of the span
//    was GC (gc_ms, cpu_ms, steps), and a major GC is always its own period;
//  - a sample per period at its start, on the single "Garbage Collection"
//    frame, weighted by the GC wall time in ms (weight type tracing-ms), so
//    the call tree and flame graph total GC time like the pprof does, and a
//    weight-0 "Idle" sample at its end.
// The samples keep their weight beside CPU/wall tracks too: with weight 0
// the profiler's call tree for this track is empty, which reads as "no GC"
// (a session tried it; the viewer test caught it). The cost is that a
// merged selection of this track and the threads' tracks adds GC twice;
// the schema's description says so, and `fathom report` counts it once.
firefox::Thread& AddGcTrack(firefox::Profile& profile, const GcProfileData& data, double offset_ms,
                            bool beside_thread_tracks) {
  uint32_t gc_category = profile.AddCategory({"GC", "orange", {}});
  uint32_t idle_category = profile.AddCategory({"Idle", "transparent", {}});
  firefox::MarkerSchema schema;
  schema.name = "GC";
  schema.tooltip_label = "{marker.name}: {marker.data.reason} ({marker.data.gc_cause})";
  schema.table_label = "{marker.name} {marker.data.reason} by {marker.data.gc_cause}, {marker.data.gc_ms} in GC";
  schema.chart_label = "{marker.data.gc_type}";
  schema.display = {"marker-chart", "marker-table", "timeline-overview"};
  schema.fields = {
      {"gc_type", "Type", "string", true},
      {"reason", "Reason (major_by)", "string", true},
      {"gc_cause", "Cause (gc_by)", "string", true},
      {"gc_ms", "Time in GC", "milliseconds", false},
      {"cpu_ms", "CPU time in GC", "milliseconds", false},
      {"steps", "GC steps", "integer", false},
      {"gcs", "GC cycles started", "integer", false},
      {"heap_live_before", "Live slots before", "integer", false},
      {"heap_live_after", "Live slots after", "integer", false},
  };
  schema.description =
      data.source == GcSource::kCounters
          ? "GCs seen between two reads of Ruby's GC counters (source: counters; no GC hooks). The marker ends at "
            "the read that saw them and spans their summed time (GC.stat(:time), CPU ms); with several GCs, type, "
            "reason and cause are the latest one's, and a read that saw minors and majors makes one marker per "
            "type, the time on the latest's. Per-step pauses need the hooks source."
          : "GC steps coalesced into one period (at most every coalescing interval; a major GC is always its own). "
            "The marker spans the first step's start to the last step's end; 'Time in GC' is the steps' sum.";
  if (beside_thread_tracks)
    schema.description +=
        " The threads' tracks hold the same GC time (samples in the GC category, on the thread the GC stopped): "
        "select this track alone to read GC time; merged with them it counts twice.";
  profile.AddMarkerSchema(schema);

  // tid 0. isMainThread only when it is the file's first track (the GC
  // profile alone: it heads the "ruby" process group); in the combined file
  // it is one more track beside the threads' tracks.
  firefox::Thread& thread = profile.AddThread("Garbage Collection", data.pid, 0, profile.thread_count() == 0, "ruby");
  thread.SetWeightType(firefox::WeightType::kTracingMs);
  uint32_t func = thread.InternFunc(kGcFrameName, "", 0, false, true);
  uint32_t frame = thread.InternFrame(func, 0, gc_category);
  uint32_t stack = thread.InternStack(std::nullopt, frame);
  // The timeline stretches each sample halfway to its neighbours, whatever
  // its weight: a weight-0 "Idle" sample where each period ends keeps a few
  // GC samples from painting the gaps between them as GC.
  uint32_t idle = thread.InternStack(
      std::nullopt, thread.InternFrame(thread.InternFunc("Idle", "", 0, false), 0, idle_category));

  // The GC profiler watched from its start: registerTime there, and an Idle
  // sample to say so (else the Firefox Profiler hatches the stretch before
  // the first GC as an empty buffer; see AddCpuTracks).
  thread.SetLifetime(offset_ms);
  thread.AddSample(offset_ms, idle, 0);
  for (const GcPeriod& p : data.periods) {
    double start = offset_ms + Ms(p.start_ns - data.start_monotonic_ns);
    double end = offset_ms + Ms(p.end_ns - data.start_monotonic_ns);
    if (end < start) end = start;
    std::vector<firefox::MarkerDatum> fields = {
        firefox::MarkerDatum::String("gc_type", GcTypeName(p.type)),
        firefox::MarkerDatum::String("reason", p.reason == GcReason::kNone ? "-" : GcReasonName(p.reason)),
        firefox::MarkerDatum::String("gc_cause", GcCauseName(p.cause)),
        firefox::MarkerDatum::Number("gc_ms", Ms(p.wall_ns)),
        firefox::MarkerDatum::Number("cpu_ms", Ms(p.cpu_ns)),
        firefox::MarkerDatum::Number("steps", p.steps),
        firefox::MarkerDatum::Number("gcs", p.cycles_started),
    };
    if (p.heap_live_before >= 0)
      fields.push_back(firefox::MarkerDatum::Number("heap_live_before", static_cast<double>(p.heap_live_before)));
    if (p.heap_live_after >= 0)
      fields.push_back(firefox::MarkerDatum::Number("heap_live_after", static_cast<double>(p.heap_live_after)));
    const char* name = p.type == GcType::kMajor ? "Major GC" : p.type == GcType::kMinor ? "Minor GC" : "GC";
    thread.AddIntervalMarker(name, start, end, gc_category, "GC", std::move(fields));
    thread.AddSample(start, stack, Ms(p.wall_ns));
    thread.AddSample(end, idle, 0);
  }
  return thread;
}

std::string EncodeGcFirefox(const GcProfileData& data, bool gzip) {
  double interval_ms = data.flush_interval_ns > 0 ? Ms(data.flush_interval_ns) : 1.0;
  firefox::Profile profile("Fathom GC profile (pid " + std::to_string(data.pid) + ")",
                           Ms(data.start_realtime_ns), interval_ms);
  profile.AddCategory({"Other", "grey", {}});
  AddGcTrack(profile, data, 0);
  profile.SetProfilingRange(0, Ms(data.end_monotonic_ns - data.start_monotonic_ns));
  std::string json = profile.ToJson();
  return gzip ? GzipCompress(json) : json;
}

}  // namespace fathom
