#include "encode/pprof_builder.h"

#include <algorithm>
#include <stdexcept>

#include "base/hash_util.h"
#include "base/utf8.h"
#include "encode/pprof_schema.h"
#include "encode/protobuf_writer.h"

namespace fathom {
namespace {

using namespace pprof_schema;  // NOLINT(build/namespaces): profile::, sample::, ... field numbers

constexpr uint64_t kMappingId = 1;

// A multiply-rotate step per element (cheap, as a stack is ~30 ids and
// add_sample is the hot path); Mix64 at the end spreads the bits for the
// power-of-two table.
inline uint64_t HashStep(uint64_t h, uint64_t v) {
  return (((h << 5) | (h >> 59)) ^ v) * 0x9e3779b97f4a7c15ULL;
}

}  // namespace

Label Label::String(std::string key, std::string value) {
  Label l;
  l.key = std::move(key);
  l.str = std::move(value);
  return l;
}

Label Label::Number(std::string key, int64_t value, std::string unit) {
  Label l;
  l.key = std::move(key);
  l.num = value;
  l.num_unit = std::move(unit);
  l.is_num = true;
  return l;
}

size_t PprofBuilder::FunctionHash::operator()(const Function& f) const {
  uint64_t h = HashStep(HashStep(HashStep(0, f.name), f.filename), f.start_line);
  return static_cast<size_t>(Mix64(h));
}


PprofBuilder::PprofBuilder(std::vector<ValueType> sample_types, ValueType period_type, int64_t period,
                           std::string_view mapping_filename)
    : sample_types_(std::move(sample_types)), period_(period) {
  intern_string("");
  // Interned up front so Encode() can stay const, and so the string table
  // starts with them in a predictable order.
  for (const ValueType& vt : sample_types_) sample_type_ids_.emplace_back(intern_string(vt.type), intern_string(vt.unit));
  period_type_ids_[0] = intern_string(period_type.type);
  period_type_ids_[1] = intern_string(period_type.unit);
  mapping_filename_ = intern_string(mapping_filename);
  sample_slots_.assign(64, SampleSlot{0, 0});
  location_slots_.assign(64, LocationSlot{{0, 0}, 0});
}

int64_t PprofBuilder::intern_string(std::string_view s) {
  // pprof's string table is a proto3 `string`: valid UTF-8 only. A name
  // with other bytes (a binary hash key, a Latin-1 file name) is repaired
  // here rather than written as is (base/utf8.h).
  if (!IsValidUtf8(s)) return intern_string(ScrubUtf8(s));
  auto it = string_ids_.find(s);
  if (it != string_ids_.end()) return it->second;
  int64_t id = static_cast<int64_t>(strings_.size());
  strings_.emplace_back(s);
  string_ids_.emplace(strings_.back(), id);
  return id;
}

void PprofBuilder::set_default_sample_type(std::string_view type) {
  if (type.empty()) {
    default_sample_type_ = 0;
    return;
  }
  for (const ValueType& vt : sample_types_) {
    if (vt.type == type) {
      default_sample_type_ = intern_string(type);
      return;
    }
  }
  throw std::invalid_argument("default sample type '" + std::string(type) + "' is not one of the sample types");
}

void PprofBuilder::set_time(int64_t time_nanos, int64_t duration_nanos) {
  time_nanos_ = time_nanos;
  duration_nanos_ = duration_nanos;
}

void PprofBuilder::add_comment(std::string_view comment) { comments_.push_back(intern_string(comment)); }

uint64_t PprofBuilder::intern_function(std::string_view name, std::string_view filename, int64_t start_line) {
  Function f{intern_string(name), intern_string(filename), start_line};
  auto [it, fresh] = function_ids_.try_emplace(f, functions_.size() + 1);
  if (fresh) functions_.push_back(f);
  return it->second;
}

uint64_t PprofBuilder::intern_location(uint64_t function_id, int64_t line) {
  if (function_id == 0 || function_id > functions_.size())
    throw std::invalid_argument("intern_location: unknown function id " + std::to_string(function_id));
  uint64_t h = Mix64(HashStep(function_id, static_cast<uint64_t>(line)));
  size_t mask = location_slots_.size() - 1;
  size_t i = h & mask;
  for (; location_slots_[i].id != 0; i = (i + 1) & mask) {
    const Location& k = location_slots_[i].key;
    if (k.function_id == function_id && k.line == line) return location_slots_[i].id;
  }
  locations_.push_back(Location{function_id, line});
  location_slots_[i] = LocationSlot{locations_.back(), locations_.size()};
  if (locations_.size() * 2 > location_slots_.size()) {
    // Rebuild at twice the size; load factor stays at most 1/2.
    std::vector<LocationSlot> grown(location_slots_.size() * 2, LocationSlot{{0, 0}, 0});
    mask = grown.size() - 1;
    for (size_t id = 1; id <= locations_.size(); id++) {
      const Location& l = locations_[id - 1];
      size_t j = Mix64(HashStep(l.function_id, static_cast<uint64_t>(l.line))) & mask;
      while (grown[j].id != 0) j = (j + 1) & mask;
      grown[j] = LocationSlot{l, id};
    }
    location_slots_.swap(grown);
  }
  return locations_.size();
}

size_t PprofBuilder::find_slot(uint64_t hash, const std::vector<uint64_t>& location_ids,
                               const std::vector<uint64_t>& label_words) const {
  size_t mask = sample_slots_.size() - 1;
  for (size_t i = hash & mask;; i = (i + 1) & mask) {
    const SampleSlot& slot = sample_slots_[i];
    if (slot.offset_plus_one == 0) return i;
    if (slot.hash != hash) continue;
    const uint64_t* rec = &sample_data_[slot.offset_plus_one - 1];
    if (rec[0] != location_ids.size() || rec[1] * 4 != label_words.size()) continue;
    const uint64_t* ids = rec + 2;
    const uint64_t* labels = ids + location_ids.size();
    if (std::equal(location_ids.begin(), location_ids.end(), ids) &&
        std::equal(label_words.begin(), label_words.end(), labels))
      return i;
  }
}

void PprofBuilder::grow_sample_slots() {
  std::vector<SampleSlot> old(sample_slots_.size() * 2, SampleSlot{0, 0});
  old.swap(sample_slots_);
  size_t mask = sample_slots_.size() - 1;
  for (const SampleSlot& slot : old) {
    if (slot.offset_plus_one == 0) continue;
    size_t i = slot.hash & mask;
    while (sample_slots_[i].offset_plus_one != 0) i = (i + 1) & mask;
    sample_slots_[i] = slot;
  }
}

void PprofBuilder::add_sample(const std::vector<uint64_t>& location_ids, const std::vector<int64_t>& values,
                              const std::vector<Label>& labels) {
  if (values.size() != sample_types_.size())
    throw std::invalid_argument("add_sample: " + std::to_string(values.size()) + " values for " +
                                std::to_string(sample_types_.size()) + " sample types");
  // All checks come before any interning, so a rejected sample leaves no trace.
  for (uint64_t id : location_ids)
    if (id == 0 || id > locations_.size())
      throw std::invalid_argument("add_sample: unknown location id " + std::to_string(id));
  for (const Label& l : labels)
    if (l.key.empty()) throw std::invalid_argument("add_sample: label with an empty key");

  scratch_labels_.clear();
  for (const Label& l : labels) {
    scratch_labels_.push_back(static_cast<uint64_t>(intern_string(l.key)));
    scratch_labels_.push_back(l.is_num ? 0 : static_cast<uint64_t>(intern_string(l.str)));
    scratch_labels_.push_back(l.is_num ? static_cast<uint64_t>(l.num) : 0);
    scratch_labels_.push_back(l.is_num ? static_cast<uint64_t>(intern_string(l.num_unit)) : 0);
  }

  uint64_t h = HashStep(0, location_ids.size());
  for (uint64_t id : location_ids) h = HashStep(h, id);
  for (uint64_t w : scratch_labels_) h = HashStep(h, w);
  h = Mix64(h);

  size_t i = find_slot(h, location_ids, scratch_labels_);
  if (uint64_t off = sample_slots_[i].offset_plus_one) {
    uint64_t* merged = &sample_data_[off - 1 + 2 + location_ids.size() + scratch_labels_.size()];
    for (size_t v = 0; v < values.size(); v++) {
      if (sample_types_[v].combine == Combine::kMax) {
        if (values[v] > static_cast<int64_t>(merged[v])) merged[v] = static_cast<uint64_t>(values[v]);
      } else {
        merged[v] += static_cast<uint64_t>(values[v]);  // unsigned, so that overflow wraps instead of being undefined
      }
    }
    return;
  }

  size_t offset = sample_data_.size();
  sample_data_.push_back(location_ids.size());
  sample_data_.push_back(labels.size());
  sample_data_.insert(sample_data_.end(), location_ids.begin(), location_ids.end());
  sample_data_.insert(sample_data_.end(), scratch_labels_.begin(), scratch_labels_.end());
  for (int64_t v : values) sample_data_.push_back(static_cast<uint64_t>(v));
  samples_.push_back(offset);
  sample_slots_[i] = SampleSlot{h, offset + 1};
  // Keep the load factor at most 1/2 so that probe runs stay short.
  if (samples_.size() * 2 > sample_slots_.size()) grow_sample_slots();
}

std::string PprofBuilder::Encode() const {
  ProtoWriter w;
  {
    // A rough guess to avoid most regrowth: samples dominate.
    size_t guess = 64 + strings_.size() * 16 + locations_.size() * 16 + functions_.size() * 20 +
                   sample_data_.size() * 3;
    w.Reserve(guess);
  }

  for (const auto& [type, unit] : sample_type_ids_) {
    size_t m = w.StartMessage();
    w.Int64Opt(value_type::kType, type);
    w.Int64Opt(value_type::kUnit, unit);
    w.EndMessage(profile::kSampleType, m);
  }

  const size_t n_values = sample_types_.size();
  for (size_t offset : samples_) {
    const uint64_t* rec = &sample_data_[offset];
    const size_t n_locations = rec[0], n_labels = rec[1];
    const uint64_t* ids = rec + 2;
    const uint64_t* labels = ids + n_locations;
    const uint64_t* values = labels + 4 * n_labels;
    size_t m = w.StartMessage();
    w.PackedVarints(sample::kLocationId, ids, n_locations);
    w.PackedVarints(sample::kValue, values, n_values);
    for (size_t l = 0; l < n_labels; l++) {
      const uint64_t* label = labels + 4 * l;
      size_t lm = w.StartMessage();
      w.Uint64Opt(label::kKey, label[0]);
      w.Uint64Opt(label::kStr, label[1]);
      w.Uint64Opt(label::kNum, label[2]);  // int64 bits: a plain varint either way
      w.Uint64Opt(label::kNumUnit, label[3]);
      w.EndMessage(sample::kLabel, lm);
    }
    w.EndMessage(profile::kSample, m);
  }

  {
    // Symbols come with the profile, so pprof must not try to symbolize.
    size_t m = w.StartMessage();
    w.Uint64(mapping::kId, kMappingId);
    w.Int64Opt(mapping::kFilename, mapping_filename_);
    w.BoolOpt(mapping::kHasFunctions, true);
    w.BoolOpt(mapping::kHasFilenames, true);
    w.BoolOpt(mapping::kHasLineNumbers, true);
    w.EndMessage(profile::kMapping, m);
  }

  for (size_t i = 0; i < locations_.size(); i++) {
    size_t m = w.StartMessage();
    w.Uint64(location::kId, i + 1);
    w.Uint64(location::kMappingId, kMappingId);
    size_t lm = w.StartMessage();
    w.Uint64Opt(line::kFunctionId, locations_[i].function_id);
    w.Int64Opt(line::kLine, locations_[i].line);
    w.EndMessage(location::kLine, lm);
    w.EndMessage(profile::kLocation, m);
  }

  for (size_t i = 0; i < functions_.size(); i++) {
    const Function& f = functions_[i];
    size_t m = w.StartMessage();
    w.Uint64(function::kId, i + 1);
    w.Int64Opt(function::kName, f.name);
    w.Int64Opt(function::kFilename, f.filename);
    w.Int64Opt(function::kStartLine, f.start_line);
    w.EndMessage(profile::kFunction, m);
  }

  // Every entry is written, "" at index 0 included: indices are positions.
  for (const std::string& s : strings_) w.Bytes(profile::kStringTable, s);

  w.Int64Opt(profile::kTimeNanos, time_nanos_);
  w.Int64Opt(profile::kDurationNanos, duration_nanos_);
  {
    size_t m = w.StartMessage();
    w.Int64Opt(value_type::kType, period_type_ids_[0]);
    w.Int64Opt(value_type::kUnit, period_type_ids_[1]);
    w.EndMessage(profile::kPeriodType, m);
  }
  w.Int64Opt(profile::kPeriod, period_);
  w.PackedVarints(profile::kComment, comments_);
  w.Int64Opt(profile::kDefaultSampleType, default_sample_type_);
  return w.Take();
}

std::string PprofBuilder::EncodeGzipped(int level) const { return GzipCompress(Encode(), level); }

}  // namespace fathom
