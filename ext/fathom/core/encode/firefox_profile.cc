#include "encode/firefox_profile.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <unordered_set>
#include <utility>

#include "base/hash_util.h"
#include "encode/json_writer.h"

namespace fathom {
namespace firefox {

namespace {

// The closed vocabularies of processed v48 (res/css/categories.css and
// src/types/markers.js at the commit that introduced v48). Anything else
// would be shown wrongly or not at all, so it is refused up front.
constexpr std::string_view kColors[] = {"transparent", "purple", "green", "orange", "yellow",
                                        "lightblue",   "blue",   "brown", "magenta", "red",
                                        "lightred",    "darkgrey", "darkgray", "grey", "gray"};
constexpr std::string_view kDisplayLocations[] = {"marker-chart",    "marker-table",  "timeline-overview",
                                                  "timeline-memory", "timeline-ipc", "timeline-fileio",
                                                  "stack-chart"};
// Left out on purpose: "unique-string" (its value is an index into the
// thread's string table, which MarkerDatum cannot express), "list" and the
// table format (values that are not a string or a number).
constexpr std::string_view kFieldFormats[] = {"string",       "url",          "file-path",   "integer",
                                              "decimal",      "percentage",   "bytes",       "duration",
                                              "time",         "seconds",      "milliseconds", "microseconds",
                                              "nanoseconds"};

// Marker data keys with a meaning of their own to the profiler, whatever the
// schema: "type" names the schema; "cause" is a backtrace object
// ({stack, time}) that the v60 upgrader rewrites (a string there crashes the
// load: found by running the profiler's upgraders on our output);
// "innerWindowID" links the marker to a browser page; "stack" is a Gecko
// marker stack. Refused as field or datum keys.
constexpr std::string_view kReservedDataKeys[] = {"type", "cause", "innerWindowID", "stack"};

template <size_t N>
bool OneOf(std::string_view v, const std::string_view (&list)[N]) {
  return std::find(std::begin(list), std::end(list), v) != std::end(list);
}

void RequireFinite(double v, const char* what) {
  if (!std::isfinite(v)) throw std::invalid_argument(std::string("firefox profile: ") + what + " must be finite");
}

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

namespace detail {

struct ProfileShared {
  std::string product;
  double start_time_unix_ms;
  double interval_ms;
  std::optional<std::pair<double, double>> profiling_range;
  std::optional<size_t> selected_thread;
  std::vector<Category> categories;
  std::vector<MarkerSchema> schemas;
  std::unordered_set<std::string> schema_names;
};

}  // namespace detail

// ---------------------------------------------------------------------------
// MarkerDatum

MarkerDatum MarkerDatum::String(std::string key, std::string value) {
  MarkerDatum d;
  d.key = std::move(key);
  d.str = std::move(value);
  return d;
}

MarkerDatum MarkerDatum::Number(std::string key, double value) {
  MarkerDatum d;
  d.key = std::move(key);
  d.num = value;
  d.is_num = true;
  return d;
}

// ---------------------------------------------------------------------------
// Thread

size_t Thread::Hash::operator()(const Func& f) const {
  uint64_t h = HashCombine(f.name, f.file);
  h = HashCombine(h, static_cast<uint64_t>(f.line));
  return static_cast<size_t>(HashCombine(h, (f.is_js ? 1u : 0u) | (f.relevant_for_js ? 2u : 0u)));
}

size_t Thread::Hash::operator()(const Frame& f) const {
  uint64_t h = HashCombine(f.func, static_cast<uint64_t>(f.line));
  return static_cast<size_t>(HashCombine(h, (static_cast<uint64_t>(f.category) << 32) | f.subcategory));
}

size_t Thread::Hash::operator()(const Stack& s) const {
  return static_cast<size_t>(Mix64((static_cast<uint64_t>(s.prefix) << 32) | s.frame));
}

Thread::Thread(const detail::ProfileShared* shared, std::string name, int64_t pid, int64_t tid, bool is_main_thread,
               std::string process_name)
    : shared_(shared),
      name_(std::move(name)),
      pid_(pid),
      tid_(tid),
      is_main_thread_(is_main_thread),
      process_name_(std::move(process_name)) {}

uint32_t Thread::InternString(std::string_view s) {
  auto it = string_ids_.find(s);
  if (it != string_ids_.end()) return it->second;
  uint32_t id = static_cast<uint32_t>(strings_.size());
  strings_.emplace_back(s);
  string_ids_.emplace(strings_.back(), id);
  return id;
}

void Thread::CheckCategory(uint32_t category, uint32_t subcategory, const char* what) const {
  const auto& cats = shared_->categories;
  if (category >= cats.size())
    throw std::invalid_argument(std::string("firefox profile: ") + what + ": category " + std::to_string(category) +
                                " was not added (there are " + std::to_string(cats.size()) + ")");
  if (subcategory >= cats[category].subcategories.size())
    throw std::invalid_argument(std::string("firefox profile: ") + what + ": category \"" + cats[category].name +
                                "\" has no subcategory " + std::to_string(subcategory));
}

uint32_t Thread::InternFunc(std::string_view name, std::string_view file, int64_t line, bool is_js,
                            bool relevant_for_js) {
  Func f{InternString(name), file.empty() ? kNone : InternString(file), line > 0 ? line : 0, is_js, relevant_for_js};
  auto [it, inserted] = func_ids_.emplace(f, static_cast<uint32_t>(funcs_.size()));
  if (inserted) funcs_.push_back(f);
  return it->second;
}

uint32_t Thread::InternFrame(uint32_t func, int64_t line, uint32_t category, uint32_t subcategory) {
  if (func >= funcs_.size())
    throw std::invalid_argument("firefox profile: InternFrame: func " + std::to_string(func) +
                                " was not returned by InternFunc on thread \"" + name_ + "\"");
  CheckCategory(category, subcategory, "InternFrame");
  Frame f{func, line > 0 ? line : 0, category, subcategory};
  auto [it, inserted] = frame_ids_.emplace(f, static_cast<uint32_t>(frames_.size()));
  if (inserted) frames_.push_back(f);
  return it->second;
}

uint32_t Thread::InternStack(std::optional<uint32_t> prefix, uint32_t frame) {
  if (frame >= frames_.size())
    throw std::invalid_argument("firefox profile: InternStack: frame " + std::to_string(frame) +
                                " was not returned by InternFrame on thread \"" + name_ + "\"");
  if (prefix && *prefix >= stacks_.size())
    throw std::invalid_argument("firefox profile: InternStack: prefix " + std::to_string(*prefix) +
                                " was not returned by InternStack on thread \"" + name_ + "\"");
  // A prefix always exists before the stacks that extend it, so every
  // stack's prefix index is smaller than its own, as the profiler requires.
  Stack s{prefix ? *prefix : kNone, frame};
  auto [it, inserted] = stack_ids_.emplace(s, static_cast<uint32_t>(stacks_.size()));
  if (inserted) stacks_.push_back(s);
  return it->second;
}

void Thread::AddSample(double time_ms, std::optional<uint32_t> stack, double weight,
                       std::optional<int64_t> cpu_delta_ns) {
  RequireFinite(time_ms, "a sample's time");
  RequireFinite(weight, "a sample's weight");
  if (stack && *stack >= stacks_.size())
    throw std::invalid_argument("firefox profile: AddSample: stack " + std::to_string(*stack) +
                                " was not returned by InternStack on thread \"" + name_ + "\"");
  if (cpu_delta_ns && *cpu_delta_ns < 0)
    throw std::invalid_argument("firefox profile: AddSample: a CPU delta must be >= 0");
  if (cpu_delta_ns) has_cpu_delta_ = true;
  samples_.push_back(Sample{time_ms, stack ? *stack : kNone, weight, cpu_delta_ns ? *cpu_delta_ns : kNoDelta});
}

void Thread::AddJsAllocation(double time_ms, std::string_view class_name, std::string_view type_name,
                             std::string_view coarse_type, double bytes, bool in_nursery,
                             std::optional<uint32_t> stack) {
  RequireFinite(time_ms, "an allocation's time");
  RequireFinite(bytes, "an allocation's bytes");
  if (bytes < 0) throw std::invalid_argument("firefox profile: AddJsAllocation: bytes must be >= 0");
  if (stack && *stack >= stacks_.size())
    throw std::invalid_argument("firefox profile: AddJsAllocation: stack " + std::to_string(*stack) +
                                " was not returned by InternStack on thread \"" + name_ + "\"");
  allocations_.push_back(Allocation{time_ms, std::string(class_name), std::string(type_name),
                                    std::string(coarse_type), bytes, in_nursery, stack ? *stack : kNone});
}

void Thread::AddMarker(std::string_view name, double start, double end, uint8_t phase, uint32_t category,
                       std::string_view schema, std::vector<MarkerDatum> data) {
  CheckCategory(category, 0, "a marker");
  if (schema.empty()) {
    if (!data.empty())
      throw std::invalid_argument("firefox profile: marker \"" + std::string(name) +
                                  "\" has data but no schema (data needs a type)");
  } else if (shared_->schema_names.count(std::string(schema)) == 0) {
    throw std::invalid_argument("firefox profile: marker \"" + std::string(name) + "\" uses schema \"" +
                                std::string(schema) + "\", which was not added with AddMarkerSchema");
  }
  std::unordered_set<std::string_view> keys;
  for (const MarkerDatum& d : data) {
    if (d.key.empty() || OneOf(d.key, kReservedDataKeys) || !keys.insert(d.key).second)
      throw std::invalid_argument("firefox profile: marker \"" + std::string(name) + "\": data key \"" + d.key +
                                  "\" is empty, reserved (type, cause, innerWindowID, stack) or repeated");
    if (d.is_num) RequireFinite(d.num, "a marker's number");
  }
  markers_.push_back(Marker{InternString(name), start, end, phase, category, std::string(schema), std::move(data)});
}

void Thread::AddIntervalMarker(std::string_view name, double start_ms, double end_ms, uint32_t category,
                               std::string_view schema, std::vector<MarkerDatum> data) {
  RequireFinite(start_ms, "a marker's start");
  RequireFinite(end_ms, "a marker's end");
  if (end_ms < start_ms)
    throw std::invalid_argument("firefox profile: marker \"" + std::string(name) + "\" ends before it starts");
  AddMarker(name, start_ms, end_ms, 1, category, schema, std::move(data));
}

void Thread::AddInstantMarker(std::string_view name, double time_ms, uint32_t category, std::string_view schema,
                              std::vector<MarkerDatum> data) {
  RequireFinite(time_ms, "a marker's time");
  AddMarker(name, time_ms, 0, 0, category, schema, std::move(data));
}

void Thread::SetLifetime(double register_ms, std::optional<double> unregister_ms) {
  RequireFinite(register_ms, "a thread's register time");
  if (unregister_ms) {
    RequireFinite(*unregister_ms, "a thread's unregister time");
    if (*unregister_ms < register_ms)
      throw std::invalid_argument("firefox profile: thread \"" + name_ + "\" ends before it starts");
  }
  register_ms_ = register_ms;
  unregister_ms_ = unregister_ms;
}

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

// ---------------------------------------------------------------------------
// Profile

Profile::Profile(std::string product, double start_time_unix_ms, double interval_ms)
    : shared_(std::make_unique<detail::ProfileShared>()) {
  RequireFinite(start_time_unix_ms, "the start time");
  if (!(interval_ms > 0) || !std::isfinite(interval_ms))
    throw std::invalid_argument("firefox profile: the interval must be a positive number of milliseconds");
  shared_->product = std::move(product);
  shared_->start_time_unix_ms = start_time_unix_ms;
  shared_->interval_ms = interval_ms;
}

Profile::~Profile() = default;
Profile::Profile(Profile&&) noexcept = default;
Profile& Profile::operator=(Profile&&) noexcept = default;

size_t Profile::category_count() const { return shared_->categories.size(); }
double Profile::start_time_unix_ms() const { return shared_->start_time_unix_ms; }

uint32_t Profile::AddCategory(Category c) {
  if (c.name.empty()) throw std::invalid_argument("firefox profile: a category needs a name");
  if (!OneOf(c.color, kColors))
    throw std::invalid_argument("firefox profile: category \"" + c.name + "\" has unknown colour \"" + c.color + "\"");
  if (c.subcategories.empty()) c.subcategories.push_back("Other");
  if (c.subcategories[0] != "Other")
    throw std::invalid_argument("firefox profile: category \"" + c.name +
                                "\": subcategory 0 must be \"Other\" (it stands for the category itself)");
  if (c.subcategories.size() > 255)
    throw std::invalid_argument("firefox profile: category \"" + c.name + "\" has more than 255 subcategories");
  // Tracks added by different writers to one profile (the combined file)
  // may each ask for the same category: it is listed once.
  for (size_t i = 0; i < shared_->categories.size(); i++) {
    const Category& have = shared_->categories[i];
    if (have.name == c.name && have.color == c.color && have.subcategories == c.subcategories)
      return static_cast<uint32_t>(i);
  }
  if (shared_->categories.size() >= 255) throw std::invalid_argument("firefox profile: more than 255 categories");
  shared_->categories.push_back(std::move(c));
  return static_cast<uint32_t>(shared_->categories.size() - 1);
}

void Profile::AddMarkerSchema(MarkerSchema s) {
  auto bad = [&](const std::string& why) {
    return std::invalid_argument("firefox profile: marker schema \"" + s.name + "\": " + why);
  };
  if (s.name.empty()) throw bad("the name is empty");
  if (shared_->schema_names.count(s.name) != 0) throw bad("a schema with this name was already added");
  for (const std::string& d : s.display)
    if (!OneOf(d, kDisplayLocations)) throw bad("unknown display location \"" + d + "\"");
  std::unordered_set<std::string_view> keys;
  for (const MarkerField& f : s.fields) {
    if (f.key.empty() || OneOf(f.key, kReservedDataKeys) || !keys.insert(f.key).second)
      throw bad("field key \"" + f.key + "\" is empty, reserved (type, cause, innerWindowID, stack) or repeated");
    if (!OneOf(f.format, kFieldFormats)) throw bad("field \"" + f.key + "\" has unsupported format \"" + f.format + "\"");
  }
  shared_->schema_names.insert(s.name);
  shared_->schemas.push_back(std::move(s));
}

Thread& Profile::AddThread(std::string name, int64_t pid, int64_t tid, bool is_main_thread, std::string process_name) {
  threads_.push_back(std::unique_ptr<Thread>(
      new Thread(shared_.get(), std::move(name), pid, tid, is_main_thread, std::move(process_name))));
  return *threads_.back();
}

void Profile::SetProfilingRange(double start_ms, double end_ms) {
  RequireFinite(start_ms, "the profiling start");
  RequireFinite(end_ms, "the profiling end");
  if (end_ms < start_ms) throw std::invalid_argument("firefox profile: the profiling range ends before it starts");
  shared_->profiling_range = std::make_pair(start_ms, end_ms);
}

void Profile::SetSelectedThread(size_t thread_index) {
  if (thread_index >= threads_.size())
    throw std::invalid_argument("firefox profile: SetSelectedThread: no thread " + std::to_string(thread_index));
  shared_->selected_thread = thread_index;
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
