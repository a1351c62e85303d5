// firefox::Profile: builds a profile in the Firefox Profiler's *processed*
// format (the JSON that profiler.firefox.com loads from a file or URL) and
// serializes it. Pure C++17; no Ruby headers.
//
// Target: processed format version 48 (meta.preprocessedProfileVersion = 48,
// meta.version = 29, the Gecko format version of the same profiler release).
// That is the version vernier, a Ruby profiler whose output the profiler
// loads today, writes. The profiler upgrades every older processed version
// step by step on load (src/profile-logic/processed-profile-versioning.ts),
// so a v48 file keeps loading in newer profilers, while a file newer than
// the deployed profiler would be refused; v48 (December 2023) is old enough
// for any deployment. Consequences of that choice, all visible below:
//  - every thread carries its own tables and its own string table
//    (`stringArray`); later versions share them in `profile.shared`, and the
//    v56/v60 upgraders move them there;
//  - marker schemas list their fields under `data` (v55 renamed it to
//    `fields`), and a schema's description is a static {label, value} entry;
//  - stacks carry category/subcategory columns (derived from frames since v53)
//    and frames an `implementation` column (removed in v54).
// Checked beyond our own validator (core/testing/firefox_format_check.h,
// which the Ruby tests run too) by running the profiler's own upgraders on
// our output (v48 -> v70) and type-checking the result against its current
// Profile type; see docs/internals/encode.md, "Firefox Profiler output".
//
// The format in one paragraph: a thread's samples point into its
// stack table; a stack is (prefix stack, frame), i.e. a tree stored as
// parent pointers, root side first; a frame is (func, line, category); a
// func is (name, file, line) as indices into the thread's string table.
// Markers are rows of (name, start, end, phase, category, data), and `data`
// is an object whose `type` names a schema in meta.markerSchema, which tells
// the UI where to show the marker and how to format each data field.
//
// Times are milliseconds relative to the profile's start (meta.startTime,
// itself milliseconds since the Unix epoch). Samples are written sorted by
// time (a stable sort, so equal times keep their order): the profiler's
// timeline assumes it.
//
// Everything repeated is interned: each distinct string, func, frame and
// stack is stored once per thread, and indices are given in first-use order.
// Output is deterministic: the same calls give the same bytes.
//
// Bad input (an index that was not returned by this thread, an unknown
// category, a non-finite time, an unknown schema) throws
// std::invalid_argument and changes nothing, so a bug shows up where it is
// made rather than as a profile the viewer refuses.
//
// Not thread-safe: one thread builds a Profile; ToJson() is const, so a
// finished profile can be serialized off the GVL while nothing touches it.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace fathom {

class JsonWriter;

namespace firefox {

inline constexpr int kProcessedProfileVersion = 48;
inline constexpr int kGeckoProfileVersion = 29;

// A category shown in the profiler's legend and colours: samples, frames and
// markers each belong to one. colour is one of the profiler's category
// colours: transparent, purple, green, orange, yellow, lightblue, blue,
// brown, magenta, red, lightred, darkgrey, darkgray, grey, gray. By
// convention (and in Gecko's profiles) "Idle" is transparent.
// subcategories must be empty (meaning {"Other"}) or start with "Other":
// subcategory 0 is the category itself.
//
// The profiler paints samples without a stack in the first *grey* category
// (its "default category"); ToJson() appends {"Other", "grey"} if no
// category is grey, so that index always exists.
struct Category {
  std::string name;
  std::string color;
  std::vector<std::string> subcategories;
};

// A field shown in a marker's tooltip and sidebar: data[key] (not one of the
// reserved keys, see MarkerDatum), formatted as
// format. Formats accepted by processed v48 (types/markers.js): "string",
// "url", "file-path", "integer", "decimal", "percentage" (0..1), "bytes",
// "duration", "time", "seconds", "milliseconds", "microseconds",
// "nanoseconds" (all times in the data are milliseconds). An empty label
// shows the key. searchable: the marker search box also matches this field
// (v57 made every field searchable; older viewers need the flag).
struct MarkerField {
  std::string key;
  std::string label;
  std::string format;
  bool searchable = false;
};

// How markers whose data.type == name are shown. The labels are templates
// such as "{marker.name} – {marker.data.gc_type}"; empty ones are omitted
// (the UI then shows the marker name). display lists where the marker
// appears: "marker-chart", "marker-table", "timeline-overview" (the track's
// own timeline row), "timeline-memory", "timeline-ipc", "timeline-fileio",
// "stack-chart". Avoid the names of Gecko's own marker types ("tracing",
// "Network", "IPC", "Text", "FileIO", "UserTiming", "CompositorScreenshot",
// "GCMajor", ...): the profiler handles those specially whatever the schema.
struct MarkerSchema {
  std::string name;
  std::string tooltip_label;
  std::string table_label;
  std::string chart_label;
  // Where the markers show; by default, where Fathom's all do.
  std::vector<std::string> display = {"marker-chart", "marker-table", "timeline-overview"};
  std::vector<MarkerField> fields;
  std::string description;  // optional text shown with every such marker
};

// One entry of a marker's data payload: a string or a number. Keys the
// profiler gives a meaning of their own are refused: "type" (the schema
// name), "cause" (a backtrace object; a string there makes the profiler fail
// to load the file), "innerWindowID" (a browser page) and "stack". So a GC's
// cause goes under another key, e.g. "gc_cause" labelled "Cause".
struct MarkerDatum {
  std::string key;
  std::string str;  // used when !is_num
  double num = 0;   // used when is_num
  bool is_num = false;

  static MarkerDatum String(std::string key, std::string value);
  static MarkerDatum Number(std::string key, double value);
};

// What a sample's weight means, per thread (samples.weightType). Weights
// feed the call tree, flame graph and sidebar only: the timeline's activity
// graph ignores them and draws each sample from halfway to the previous
// sample to halfway to the next (ActivityGraphFills.tsx), so sparse weighted
// samples (one per GC) need a weight-0 sample on an "Idle" (transparent)
// frame where the activity ends, or they smear across the gaps. A sample
// with no stack is no substitute: it is drawn in the grey default category.
// A kSamples thread whose weights are all 1 is written with weight null.
//  kSamples   — a count (the default; a plain sampling profile has weight 1);
//  kTracingMs — milliseconds: the call tree and flame graph sum weights as
//               time ("Running time (ms)"), e.g. GC time;
//  kBytes     — bytes, e.g. allocation sizes.
enum class WeightType { kSamples, kTracingMs, kBytes };

namespace detail {
struct ProfileShared;  // categories and schemas, shared by a Profile's threads
}

// One track: its own string, func, frame and stack tables, samples and markers.
// Created by Profile::AddThread and owned by the Profile; references stay
// valid for the Profile's lifetime (also across AddThread and moves).
class Thread {
 public:
  Thread(const Thread&) = delete;
  Thread& operator=(const Thread&) = delete;

  // A function. file "" means unknown (written as null), as does line <= 0
  // (the line the function starts at). is_js is the format's isJS: a frame
  // of the profiled script language (Ruby here), as opposed to native code;
  // the call tree's "JavaScript" filter keeps isJS funcs plus those with
  // relevant_for_js (use it for C functions called from Ruby). Funcs are
  // told apart by all five values.
  uint32_t InternFunc(std::string_view name, std::string_view file, int64_t line, bool is_js = true,
                      bool relevant_for_js = false);
  // A frame: func at a line (<= 0: unknown), in a category/subcategory.
  uint32_t InternFrame(uint32_t func, int64_t line, uint32_t category, uint32_t subcategory = 0);
  // A stack: frame called from the stack prefix (std::nullopt: a root).
  // Build stacks root first: InternStack(InternStack(nullopt, main), leaf).
  uint32_t InternStack(std::optional<uint32_t> prefix, uint32_t frame);

  // A sample at time_ms on stack (std::nullopt: no stack, e.g. idle), with
  // the given weight in this thread's WeightType. cpu_delta_ns: the thread's
  // CPU time since its previous sample, in ns (the samples table's
  // threadCPUDelta column, unit meta.sampleUnits.threadCPUDelta = "ns").
  // The column is written when any sample of the thread has a delta (null for
  // the others); the profiler ignores the first sample's value and uses the
  // rest for the CPU-usage height of the activity graph.
  void AddSample(double time_ms, std::optional<uint32_t> stack, double weight = 1,
                 std::optional<int64_t> cpu_delta_ns = std::nullopt);

  // An allocation in the thread's jsAllocations table (v48 JsAllocationsTable:
  // time, className, typeName, coarseType, weight in bytes, inNursery,
  // stack). The profiler's call tree offers "JavaScript allocations" once a
  // thread has any: the allocating stacks summed by bytes. Ruby objects are
  // managed-heap objects named by class, which is what this table models
  // (nativeAllocations models malloc/free and has no class name).
  // type_name and coarse_type are free text (Gecko writes "JSObject" and
  // "Object"); bytes must be finite and >= 0.
  void AddJsAllocation(double time_ms, std::string_view class_name, std::string_view type_name,
                       std::string_view coarse_type, double bytes, bool in_nursery, std::optional<uint32_t> stack);
  size_t js_allocation_count() const { return allocations_.size(); }

  // Markers. schema is the MarkerSchema name (written as data.type); it
  // must have been added to the Profile first. schema "" means a marker with
  // no data at all (then data must be empty). Datum keys must be non-empty,
  // distinct and not reserved (see MarkerDatum); numbers must be finite.
  void AddIntervalMarker(std::string_view name, double start_ms, double end_ms, uint32_t category,
                         std::string_view schema = "", std::vector<MarkerDatum> data = {});
  void AddInstantMarker(std::string_view name, double time_ms, uint32_t category, std::string_view schema = "",
                        std::vector<MarkerDatum> data = {});

  void SetWeightType(WeightType type) { weight_type_ = type; }
  // When the thread started and (if it did) ended; default: 0 and running.
  void SetLifetime(double register_ms, std::optional<double> unregister_ms = std::nullopt);

  const std::string& name() const { return name_; }
  size_t string_count() const { return strings_.size(); }
  size_t func_count() const { return funcs_.size(); }
  size_t frame_count() const { return frames_.size(); }
  size_t stack_count() const { return stacks_.size(); }
  size_t sample_count() const { return samples_.size(); }
  size_t marker_count() const { return markers_.size(); }

 private:
  friend class Profile;

  static constexpr uint32_t kNone = UINT32_MAX;  // null index / unknown line

  struct Func {
    uint32_t name, file;  // string indices; file kNone = null
    int64_t line;         // <= 0 = null
    bool is_js, relevant_for_js;
    bool operator==(const Func& o) const {
      return name == o.name && file == o.file && line == o.line && is_js == o.is_js &&
             relevant_for_js == o.relevant_for_js;
    }
  };
  struct Frame {
    uint32_t func;
    int64_t line;
    uint32_t category, subcategory;
    bool operator==(const Frame& o) const {
      return func == o.func && line == o.line && category == o.category && subcategory == o.subcategory;
    }
  };
  struct Stack {
    uint32_t prefix;  // kNone = root
    uint32_t frame;
    bool operator==(const Stack& o) const { return prefix == o.prefix && frame == o.frame; }
  };
  struct Hash {
    size_t operator()(const Func& f) const;
    size_t operator()(const Frame& f) const;
    size_t operator()(const Stack& s) const;
  };
  struct Sample {
    double time;
    uint32_t stack;  // kNone = null
    double weight;
    int64_t cpu_delta;  // kNoDelta = null
  };
  static constexpr int64_t kNoDelta = INT64_MIN;
  struct Allocation {
    double time;
    std::string class_name, type_name, coarse_type;
    double bytes;
    bool in_nursery;
    uint32_t stack;  // kNone = null
  };
  struct Marker {
    uint32_t name;  // string index
    double start, end;
    uint8_t phase;  // 0 instant (end unused), 1 interval
    uint32_t category;
    std::string schema;  // "" = data null
    std::vector<MarkerDatum> data;
  };

  Thread(const detail::ProfileShared* shared, std::string name, int64_t pid, int64_t tid, bool is_main_thread,
         std::string process_name);

  uint32_t InternString(std::string_view s);
  void CheckCategory(uint32_t category, uint32_t subcategory, const char* what) const;
  void AddMarker(std::string_view name, double start, double end, uint8_t phase, uint32_t category,
                 std::string_view schema, std::vector<MarkerDatum> data);
  void Write(JsonWriter& w) const;

  const detail::ProfileShared* shared_;
  std::string name_;
  int64_t pid_, tid_;
  bool is_main_thread_;
  std::string process_name_;
  WeightType weight_type_ = WeightType::kSamples;
  double register_ms_ = 0;
  std::optional<double> unregister_ms_;

  std::deque<std::string> strings_;  // a deque so string_ids_' keys stay valid
  std::unordered_map<std::string_view, uint32_t> string_ids_;
  std::vector<Func> funcs_;
  std::unordered_map<Func, uint32_t, Hash> func_ids_;
  std::vector<Frame> frames_;
  std::unordered_map<Frame, uint32_t, Hash> frame_ids_;
  std::vector<Stack> stacks_;
  std::unordered_map<Stack, uint32_t, Hash> stack_ids_;
  std::vector<Sample> samples_;
  bool has_cpu_delta_ = false;
  std::vector<Allocation> allocations_;
  std::vector<Marker> markers_;
};

class Profile {
 public:
  // product: shown as the profile's name (e.g. "Fathom (Ruby 3.1.2)").
  // start_time_unix_ms: meta.startTime, the moment all other times count
  // from. interval_ms: the sampling interval (> 0); the timeline draws a
  // lone sample this wide.
  Profile(std::string product, double start_time_unix_ms, double interval_ms);
  ~Profile();
  Profile(Profile&&) noexcept;
  Profile& operator=(Profile&&) noexcept;
  Profile(const Profile&) = delete;
  Profile& operator=(const Profile&) = delete;

  // Returns the category's index (at most 255 categories, each with at most
  // 255 subcategories: the profiler keeps them in byte arrays). A category
  // equal to one already added (name, colour, subcategories) gets its index.
  uint32_t AddCategory(Category c);
  // Schema names must be distinct; see MarkerSchema for the checks.
  void AddMarkerSchema(MarkerSchema s);

  // A track. pid is written as a string (the format's Pid type); threads
  // with the same pid are grouped under one process, whose main thread (if
  // any) is its top-level track. process_name: shown for the process ("" =
  // omitted).
  Thread& AddThread(std::string name, int64_t pid, int64_t tid, bool is_main_thread, std::string process_name = "");

  // The recorded range (meta.profilingStartTime/EndTime, and meta.endTime),
  // so the timeline spans the whole recording even where nothing happened.
  // Optional; without it the profiler uses the span of the samples/markers.
  void SetProfilingRange(double start_ms, double end_ms);
  // Which thread the profiler selects when it opens the file (index in
  // AddThread order); default: its own choice.
  void SetSelectedThread(size_t thread_index);

  size_t thread_count() const { return threads_.size(); }
  // meta.startTime (Unix ms): every time in the profile counts from it.
  double start_time_unix_ms() const;
  size_t category_count() const;
  Thread& thread(size_t index) { return *threads_.at(index); }

  // The whole processed profile as JSON text (UTF-8). Every thread is listed
  // in meta.initialVisibleThreads: the profiler's default would hide threads
  // with few samples relative to the busiest one, which would hide a GC track
  // (a few heavily weighted samples) next to a CPU-sampled thread. Throws
  // std::logic_error if there is no thread (the profiler cannot open such a
  // profile).
  std::string ToJson() const;

 private:
  std::unique_ptr<detail::ProfileShared> shared_;
  std::vector<std::unique_ptr<Thread>> threads_;
};

}  // namespace firefox
}  // namespace fathom
