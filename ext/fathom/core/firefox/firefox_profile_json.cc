// Writing the processed format: each Thread's tables and the Profile's
// meta, categories and marker schemas, as JSON (firefox_profile.h says what
// is built; firefox_profile.cc checks it as it is added).
#include "firefox/firefox_profile.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <utility>

#include "firefox/json_writer.h"
#include "firefox/profile_shared.h"

namespace fathom {
namespace firefox {

namespace {

// Writes a table column: [f(items[0]), f(items[1]), ...].
template <typename T, typename F>
void Column(JsonWriter& w, std::string_view key, const std::vector<T>& items, F&& f) {
  w.Key(key);
  w.BeginArray();
  for (const T& item : items) f(item);
  w.EndArray();
}

// A column of n copies of the same value (the columns we do not use).
template <typename F>
void ConstColumn(JsonWriter& w, std::string_view key, size_t n, F&& f) {
  w.Key(key);
  w.BeginArray();
  for (size_t i = 0; i < n; i++) f();
  w.EndArray();
}

void WriteIndexOrNull(JsonWriter& w, uint32_t index, uint32_t none) {
  if (index == none)
    w.Null();
  else
    w.Uint(index);
}

void WriteLineOrNull(JsonWriter& w, int64_t line) {
  if (line <= 0)
    w.Null();
  else
    w.Int(line);
}

const char* WeightTypeName(WeightType t) {
  switch (t) {
    case WeightType::kSamples: return "samples";
    case WeightType::kTracingMs: return "tracing-ms";
    case WeightType::kBytes: return "bytes";
  }
  return "samples";
}

}  // namespace

void Thread::Write(JsonWriter& w) const {
  w.BeginObject();
  // Process and lifetime. processStartupTime is the process's start, which
  // for us is the profile's start.
  w.KeyString("processType", "default");
  w.KeyDouble("processStartupTime", 0);
  w.KeyNull("processShutdownTime");
  w.KeyDouble("registerTime", register_ms_);
  w.Key("unregisterTime");
  if (unregister_ms_)
    w.Double(*unregister_ms_);
  else
    w.Null();
  w.Key("pausedRanges");
  w.BeginArray();
  w.EndArray();
  w.KeyString("name", name_);
  w.KeyBool("isMainThread", is_main_thread_);
  if (!process_name_.empty()) w.KeyString("processName", process_name_);
  w.KeyString("pid", std::to_string(pid_));  // a string since v47
  w.KeyInt("tid", tid_);

  // samples, in time order (stable, so ties keep insertion order).
  std::vector<uint32_t> order(samples_.size());
  std::iota(order.begin(), order.end(), 0u);
  auto by_time = [this](uint32_t a, uint32_t b) { return samples_[a].time < samples_[b].time; };
  if (!std::is_sorted(order.begin(), order.end(), by_time)) std::stable_sort(order.begin(), order.end(), by_time);
  // A weight column of all ones says nothing: null means "every weight is 1".
  bool unit_weights = weight_type_ == WeightType::kSamples &&
                      std::all_of(samples_.begin(), samples_.end(), [](const Sample& s) { return s.weight == 1; });
  w.Key("samples");
  w.BeginObject();
  Column(w, "stack", order, [&](uint32_t i) { WriteIndexOrNull(w, samples_[i].stack, kNone); });
  Column(w, "time", order, [&](uint32_t i) { w.Double(samples_[i].time); });
  if (unit_weights) {
    w.KeyNull("weight");
  } else {
    Column(w, "weight", order, [&](uint32_t i) { w.Double(samples_[i].weight); });
  }
  w.KeyString("weightType", WeightTypeName(weight_type_));
  if (has_cpu_delta_) {
    Column(w, "threadCPUDelta", order, [&](uint32_t i) {
      if (samples_[i].cpu_delta == kNoDelta)
        w.Null();
      else
        w.Int(samples_[i].cpu_delta);
    });
  }
  w.KeyInt("length", static_cast<int64_t>(samples_.size()));
  w.EndObject();

  // jsAllocations (only when there are some: the profiler offers the
  // allocation views for a thread that has the table), in time order.
  if (!allocations_.empty()) {
    std::vector<uint32_t> aorder(allocations_.size());
    std::iota(aorder.begin(), aorder.end(), 0u);
    std::stable_sort(aorder.begin(), aorder.end(),
                     [this](uint32_t a, uint32_t b) { return allocations_[a].time < allocations_[b].time; });
    w.Key("jsAllocations");
    w.BeginObject();
    Column(w, "time", aorder, [&](uint32_t i) { w.Double(allocations_[i].time); });
    Column(w, "className", aorder, [&](uint32_t i) { w.String(allocations_[i].class_name); });
    Column(w, "typeName", aorder, [&](uint32_t i) { w.String(allocations_[i].type_name); });
    Column(w, "coarseType", aorder, [&](uint32_t i) { w.String(allocations_[i].coarse_type); });
    Column(w, "weight", aorder, [&](uint32_t i) { w.Double(allocations_[i].bytes); });
    w.KeyString("weightType", "bytes");
    Column(w, "inNursery", aorder, [&](uint32_t i) { w.Bool(allocations_[i].in_nursery); });
    Column(w, "stack", aorder, [&](uint32_t i) { WriteIndexOrNull(w, allocations_[i].stack, kNone); });
    w.KeyInt("length", static_cast<int64_t>(allocations_.size()));
    w.EndObject();
  }

  // markers
  w.Key("markers");
  w.BeginObject();
  Column(w, "data", markers_, [&](const Marker& m) {
    if (m.schema.empty()) {
      w.Null();
      return;
    }
    w.BeginObject();
    w.KeyString("type", m.schema);
    for (const MarkerDatum& d : m.data) {
      if (d.is_num)
        w.KeyDouble(d.key, d.num);
      else
        w.KeyString(d.key, d.str);
    }
    w.EndObject();
  });
  Column(w, "name", markers_, [&](const Marker& m) { w.Uint(m.name); });
  Column(w, "startTime", markers_, [&](const Marker& m) { w.Double(m.start); });
  Column(w, "endTime", markers_, [&](const Marker& m) {
    if (m.phase == 0)
      w.Null();
    else
      w.Double(m.end);
  });
  Column(w, "phase", markers_, [&](const Marker& m) { w.Uint(m.phase); });
  Column(w, "category", markers_, [&](const Marker& m) { w.Uint(m.category); });
  w.KeyInt("length", static_cast<int64_t>(markers_.size()));
  w.EndObject();

  // stackTable. Its category is the frame's (every frame has one), which is
  // what the profiler derives itself since v53.
  w.Key("stackTable");
  w.BeginObject();
  Column(w, "frame", stacks_, [&](const Stack& s) { w.Uint(s.frame); });
  Column(w, "category", stacks_, [&](const Stack& s) { w.Uint(frames_[s.frame].category); });
  Column(w, "subcategory", stacks_, [&](const Stack& s) { w.Uint(frames_[s.frame].subcategory); });
  Column(w, "prefix", stacks_, [&](const Stack& s) { WriteIndexOrNull(w, s.prefix, kNone); });
  w.KeyInt("length", static_cast<int64_t>(stacks_.size()));
  w.EndObject();

  // frameTable. address -1 and the nulls: no native code addresses, no
  // inlining, no browser windows, no JIT tiers.
  const size_t nframes = frames_.size();
  w.Key("frameTable");
  w.BeginObject();
  ConstColumn(w, "address", nframes, [&] { w.Int(-1); });
  ConstColumn(w, "inlineDepth", nframes, [&] { w.Int(0); });
  Column(w, "category", frames_, [&](const Frame& f) { w.Uint(f.category); });
  Column(w, "subcategory", frames_, [&](const Frame& f) { w.Uint(f.subcategory); });
  Column(w, "func", frames_, [&](const Frame& f) { w.Uint(f.func); });
  ConstColumn(w, "nativeSymbol", nframes, [&] { w.Null(); });
  ConstColumn(w, "innerWindowID", nframes, [&] { w.Null(); });
  ConstColumn(w, "implementation", nframes, [&] { w.Null(); });
  Column(w, "line", frames_, [&](const Frame& f) { WriteLineOrNull(w, f.line); });
  ConstColumn(w, "column", nframes, [&] { w.Null(); });
  w.KeyInt("length", static_cast<int64_t>(nframes));
  w.EndObject();

  // funcTable. resource -1: functions are not grouped into libraries/files.
  w.Key("funcTable");
  w.BeginObject();
  Column(w, "name", funcs_, [&](const Func& f) { w.Uint(f.name); });
  Column(w, "isJS", funcs_, [&](const Func& f) { w.Bool(f.is_js); });
  Column(w, "relevantForJS", funcs_, [&](const Func& f) { w.Bool(f.relevant_for_js); });
  ConstColumn(w, "resource", funcs_.size(), [&] { w.Int(-1); });
  Column(w, "fileName", funcs_, [&](const Func& f) { WriteIndexOrNull(w, f.file, kNone); });
  Column(w, "lineNumber", funcs_, [&](const Func& f) { WriteLineOrNull(w, f.line); });
  ConstColumn(w, "columnNumber", funcs_.size(), [&] { w.Null(); });
  w.KeyInt("length", static_cast<int64_t>(funcs_.size()));
  w.EndObject();

  // Empty but required: the upgraders read their columns.
  w.Key("resourceTable");
  w.BeginObject();
  w.KeyInt("length", 0);
  for (const char* col : {"lib", "name", "host", "type"}) {
    w.Key(col);
    w.BeginArray();
    w.EndArray();
  }
  w.EndObject();
  w.Key("nativeSymbols");
  w.BeginObject();
  for (const char* col : {"libIndex", "address", "name", "functionSize"}) {
    w.Key(col);
    w.BeginArray();
    w.EndArray();
  }
  w.KeyInt("length", 0);
  w.EndObject();

  w.Key("stringArray");
  w.BeginArray();
  for (const std::string& s : strings_) w.String(s);
  w.EndArray();
  w.EndObject();
}

std::string Profile::ToJson() const {
  if (threads_.empty()) throw std::logic_error("firefox profile: a profile needs at least one thread");
  const detail::ProfileShared& sh = *shared_;

  // The profiler's default category is the first grey one (see Category).
  std::vector<Category> categories = sh.categories;
  if (std::none_of(categories.begin(), categories.end(), [](const Category& c) { return c.color == "grey"; }))
    categories.push_back(Category{"Other", "grey", {"Other"}});

  std::string out;
  size_t estimate = 4096;
  for (const auto& t : threads_) estimate += 40 * (t->samples_.size() + t->stacks_.size() + t->frames_.size()) +
                                              120 * t->markers_.size() + 60 * t->strings_.size();
  out.reserve(estimate);
  JsonWriter w(&out);
  w.BeginObject();

  w.Key("meta");
  w.BeginObject();
  w.KeyDouble("interval", sh.interval_ms);
  w.KeyDouble("startTime", sh.start_time_unix_ms);
  if (sh.profiling_range) {
    w.KeyDouble("endTime", sh.start_time_unix_ms + sh.profiling_range->second);
    w.KeyDouble("profilingStartTime", sh.profiling_range->first);
    w.KeyDouble("profilingEndTime", sh.profiling_range->second);
  }
  w.KeyInt("processType", 0);
  w.KeyString("product", sh.product);
  w.KeyInt("stackwalk", 0);  // no native stack walking
  w.KeyInt("version", kGeckoProfileVersion);
  w.KeyInt("preprocessedProfileVersion", kProcessedProfileVersion);
  // Nothing to symbolicate: without this the profiler would try to look up
  // native symbols for our (address-less) frames.
  w.KeyBool("symbolicated", true);
  // File names are Ruby paths, not Firefox sources on searchfox.org.
  w.KeyBool("sourceCodeIsNotOnSearchfox", true);
  // The unit of threadCPUDelta (v48 accepts "ns", "µs" or "variable CPU
  // cycles"): our deltas are the thread CPU clock's, in ns.
  if (std::any_of(threads_.begin(), threads_.end(), [](const auto& t) { return t->has_cpu_delta_; })) {
    w.Key("sampleUnits");
    w.BeginObject();
    w.KeyString("time", "ms");
    w.KeyString("eventDelay", "ms");
    w.KeyString("threadCPUDelta", "ns");
    w.EndObject();
  }
  w.Key("categories");
  w.BeginArray();
  for (const Category& c : categories) {
    w.BeginObject();
    w.KeyString("name", c.name);
    w.KeyString("color", c.color);
    w.Key("subcategories");
    w.BeginArray();
    for (const std::string& s : c.subcategories) w.String(s);
    w.EndArray();
    w.EndObject();
  }
  w.EndArray();
  w.Key("markerSchema");
  w.BeginArray();
  for (const MarkerSchema& s : sh.schemas) {
    w.BeginObject();
    w.KeyString("name", s.name);
    if (!s.tooltip_label.empty()) w.KeyString("tooltipLabel", s.tooltip_label);
    if (!s.table_label.empty()) w.KeyString("tableLabel", s.table_label);
    if (!s.chart_label.empty()) w.KeyString("chartLabel", s.chart_label);
    w.Key("display");
    w.BeginArray();
    for (const std::string& d : s.display) w.String(d);
    w.EndArray();
    // v48 keeps fields under "data"; a static {label, value} entry is the
    // description (the v55 upgrader turns the "Description" one into
    // schema.description).
    w.Key("data");
    w.BeginArray();
    if (!s.description.empty()) {
      w.BeginObject();
      w.KeyString("label", "Description");
      w.KeyString("value", s.description);
      w.EndObject();
    }
    for (const MarkerField& f : s.fields) {
      w.BeginObject();
      w.KeyString("key", f.key);
      if (!f.label.empty()) w.KeyString("label", f.label);
      w.KeyString("format", f.format);
      if (f.searchable) w.KeyBool("searchable", true);
      w.EndObject();
    }
    w.EndArray();
    w.EndObject();
  }
  w.EndArray();
  w.Key("initialVisibleThreads");
  w.BeginArray();
  for (size_t i = 0; i < threads_.size(); i++) w.Uint(i);
  w.EndArray();
  if (sh.selected_thread) {
    w.Key("initialSelectedThreads");
    w.BeginArray();
    w.Uint(*sh.selected_thread);
    w.EndArray();
  }
  w.EndObject();  // meta

  w.Key("libs");
  w.BeginArray();
  w.EndArray();

  w.Key("threads");
  w.BeginArray();
  for (const auto& t : threads_) t->Write(w);
  w.EndArray();

  w.EndObject();
  return out;
}

}  // namespace firefox
}  // namespace fathom
