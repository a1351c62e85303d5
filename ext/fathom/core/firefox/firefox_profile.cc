#include "firefox/firefox_profile.h"

#include <algorithm>
#include <cmath>
#include <numeric>
#include <stdexcept>
#include <utility>

#include "base/hash_util.h"
#include "firefox/profile_shared.h"

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

}  // namespace

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
}  // namespace firefox
}  // namespace fathom
