#include "gc/firefox_gc_track.h"

#include <string>

#include "firefox/firefox_profile.h"
#include "encode/gzip.h"

namespace fathom {

namespace {

double Ms(int64_t ns) { return static_cast<double>(ns) / 1e6; }

// Said beside CPU/wall tracks, in either schema's description.
constexpr const char* kBesideThreadTracks =
    " The threads' tracks hold the same GC time (samples in the GC category, on the thread the GC stopped): "
    "select this track alone to read GC time; merged with them it counts twice.";

// Hooks: one marker per coalesced period, of a single type.
firefox::MarkerSchema HooksSchema() {
  firefox::MarkerSchema schema;
  schema.name = "GC";
  schema.tooltip_label = "{marker.name}: {marker.data.reason} ({marker.data.gc_cause})";
  schema.table_label = "{marker.name} {marker.data.reason} by {marker.data.gc_cause}, {marker.data.gc_ms} in GC";
  schema.chart_label = "{marker.data.gc_type}";
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
      "GC steps coalesced into one period (at most every coalescing interval; a major GC is always its own). "
      "The marker spans the first step's start to the last step's end; 'Time in GC' is the steps' sum.";
  return schema;
}

// Counters: one marker per read that saw GCs, with only what Ruby's
// counters tell. Its own schema (not "GC" with blanks) so that wall time,
// steps and an unknown reason/cause are absent rather than 0 or "unseen".
firefox::MarkerSchema CountersSchema() {
  firefox::MarkerSchema schema;
  schema.name = "GCPoll";
  // The table has a Name column already: its label starts at the count.
  schema.table_label =
      "×{marker.data.gcs} ({marker.data.minor_gcs} minor, {marker.data.major_gcs} major): "
      "{marker.data.cpu_ms} CPU in GC";
  schema.tooltip_label = "{marker.name} " + schema.table_label;
  schema.chart_label = "×{marker.data.gcs}";
  schema.fields = {
      {"gcs", "GCs", "integer", false},
      {"minor_gcs", "Minor GCs", "integer", false},
      {"major_gcs", "Major GCs", "integer", false},
      {"cpu_ms", "CPU time in GC (GC.stat(:time))", "milliseconds", false},
      {"latest", "Latest GC", "string", true},
      {"reason", "Latest GC's reason (major_by)", "string", true},
      {"gc_cause", "Latest GC's cause (gc_by)", "string", true},
  };
  schema.description =
      "The GCs seen by one read of Ruby's GC counters (source: counters; no GC hooks): how many minor and major "
      "GCs ran since the previous read, and the CPU time Ruby counted in them (GC.stat(:time): process CPU time, "
      "whole ms). The marker ends at the read and spans that time (never before the previous read). Reason and "
      "cause are the latest GC's, when Ruby gave them. Wall time in GC, pauses and steps need the hooks source.";
  return schema;
}

void AddHooksMarker(firefox::Thread& thread, const GcPeriod& p, double start, double end, uint32_t category) {
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
  thread.AddIntervalMarker(name, start, end, category, "GC", std::move(fields));
}

// By the types the read saw, not by its counts: the marker chart makes a
// row per distinct name, so a name per count would make a row per read.
const char* CountersMarkerName(const GcPeriod& p) {
  if (p.minor_gcs > 0 && p.major_gcs > 0) return "Minor + major GCs";
  return p.major_gcs > 0 ? "Major GC" : "Minor GC";
}

void AddCountersMarker(firefox::Thread& thread, const GcPeriod& p, double start, double end, uint32_t category) {
  std::vector<firefox::MarkerDatum> fields = {
      firefox::MarkerDatum::Number("gcs", p.cycles_started),
      firefox::MarkerDatum::Number("minor_gcs", p.minor_gcs),
      firefox::MarkerDatum::Number("major_gcs", p.major_gcs),
      firefox::MarkerDatum::Number("cpu_ms", Ms(p.cpu_ns)),
      firefox::MarkerDatum::String("latest", GcTypeName(p.type)),
  };
  if (p.type == GcType::kMajor && p.reason != GcReason::kNone && p.reason != GcReason::kUnknown)
    fields.push_back(firefox::MarkerDatum::String("reason", GcReasonName(p.reason)));
  if (p.cause != GcCause::kUnknown && p.cause != GcCause::kUnseen)
    fields.push_back(firefox::MarkerDatum::String("gc_cause", GcCauseName(p.cause)));
  thread.AddIntervalMarker(CountersMarkerName(p), start, end, category, "GCPoll", std::move(fields));
}

}  // namespace

// One track, "Garbage Collection":
//  - an interval marker per period. Hooks: "Minor GC"/"Major GC" (schema
//    "GC"), from the start of its first step to the end of its last. A
//    coalesced period can span mutator time between its steps; its fields
//    say how much of the span was GC (gc_ms, cpu_ms, steps), and a major GC
//    is always its own period. Counters: one marker per read that saw GCs
//    (schema "GCPoll": counts by type, CPU time, the latest GC's labels);
//  - a sample per period at its start, on the single "Garbage Collection"
//    frame, weighted by its time in GC in ms (weight type tracing-ms: the
//    wall time with hooks, GC.stat(:time)'s CPU time with counters, the
//    only time that source has), so the call tree and flame graph total GC
//    time like the pprof does, and a weight-0 "Idle" sample at its end.
// The samples keep their weight beside CPU/wall tracks too: with weight 0
// the profiler's call tree for this track is empty, which reads as "no GC"
// (a session tried it; the viewer test caught it). The cost is that a
// merged selection of this track and the threads' tracks adds GC twice;
// the schema's description says so, and `fathom report` counts it once.
firefox::Thread& AddGcTrack(firefox::Profile& profile, const GcProfileData& data, double offset_ms,
                            bool beside_thread_tracks) {
  uint32_t gc_category = profile.AddCategory({"GC", "orange", {}});
  uint32_t idle_category = profile.AddCategory({"Idle", "transparent", {}});
  bool counters = data.source == GcSource::kCounters;
  firefox::MarkerSchema schema = counters ? CountersSchema() : HooksSchema();
  if (beside_thread_tracks) schema.description += kBesideThreadTracks;
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
    if (counters) {
      AddCountersMarker(thread, p, start, end, gc_category);
    } else {
      AddHooksMarker(thread, p, start, end, gc_category);
    }
    thread.AddSample(start, stack, Ms(counters ? p.cpu_ns : p.wall_ns));
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
