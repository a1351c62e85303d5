// PprofBuilder: assembles a perftools.profiles.Profile (pprof's profile.proto)
// and serializes it. Pure C++17; no Ruby headers.
//
// Everything repeated in a profile is interned: strings go into the string
// table once, a (name, system name, file, start line) tuple becomes one
// Function, a (function, line) pair one Location, and samples with the same
// location list and labels are merged by combining their values (summed,
// or the larger kept, as each sample type says), so each distinct stack is
// stored once however many times it was observed.
//
// Output is deterministic: ids and string indices are given in first-use
// order and samples are written in first-insertion order, so the same calls
// give the same bytes. Not thread-safe; Encode() is const, so a finished
// builder can be encoded off the GVL while nothing else touches it.
#pragma once

#include <cstdint>
#include <deque>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "encode/gzip.h"  // GzipCompress, declared here before

namespace fathom {

// How two values of one sample type add up when samples merge (the
// builder's merging of samples with the same stack and labels, and a
// profile's aggregator: encode/sample_schema.h).
enum class Combine : uint8_t { kSum, kMax };

struct ValueType {
  std::string type;  // e.g. "inuse_space"
  std::string unit;  // e.g. "bytes"
  Combine combine = Combine::kSum;
};

// A sample label: either a string value or a number with an optional unit.
struct Label {
  std::string key;
  std::string str;       // used when !is_num
  int64_t num = 0;       // used when is_num
  std::string num_unit;  // optional, e.g. "bytes"
  bool is_num = false;

  static Label String(std::string key, std::string value);
  static Label Number(std::string key, int64_t value, std::string unit = "");
};

class PprofBuilder {
 public:
  // The profile has exactly one Mapping (id 1), named mapping_filename.
  PprofBuilder(std::vector<ValueType> sample_types, ValueType period_type, int64_t period,
               std::string_view mapping_filename = "ruby");

  // Which sample type viewers show first: one of sample_types' type, else
  // std::invalid_argument; "" unsets it.
  void set_default_sample_type(std::string_view type);
  // Wall-clock time the collection started (ns since the Unix epoch) and how long it lasted.
  void set_time(int64_t time_nanos, int64_t duration_nanos);
  int64_t time_nanos() const { return time_nanos_; }
  int64_t duration_nanos() const { return duration_nanos_; }
  // Free-form comments (stored as string-table indices in Profile.comment).
  void add_comment(std::string_view comment);

  // Returns the Function id (1-based) for this tuple, creating it on first use.
  //
  // Function.system_name is left empty. pprof's symbolizer rewrites the
  // name of every function whose name is empty or equal to its system_name
  // (demangleSingleFunction: "already demangled" is name != system_name),
  // and its clean-up of names that look like C++ strips <...>, [...] and
  // scopes: "<main>" became "[ruby]" and "SessionStore::SESSIONS (Hash)"
  // "…SESSIONS" in `go tool pprof -top` and the web UI unless the user
  // passed -symbolize=none. Names here are already what a person should
  // read (Ruby names, or C symbols demangled when captured), so there is no
  // system name to give; an empty one differs from the name and pprof
  // leaves the name alone.
  uint64_t intern_function(std::string_view name, std::string_view filename, int64_t start_line);
  // Returns the Location id (1-based) for (function, line), creating it on first use.
  // Every location points at the single Mapping (id 1). Throws
  // std::invalid_argument if function_id was not returned by intern_function.
  uint64_t intern_location(uint64_t function_id, int64_t line);

  // Adds values to the sample with this stack (location ids, leaf first, as
  // pprof wants) and these labels; values.size() must equal the number of
  // sample types, every location id must come from intern_location and every
  // label key must be non-empty (else std::invalid_argument, and nothing is
  // added). Labels are compared in the order given.
  void add_sample(const std::vector<uint64_t>& location_ids, const std::vector<int64_t>& values,
                  const std::vector<Label>& labels);

  size_t sample_count() const { return samples_.size(); }
  size_t function_count() const { return functions_.size(); }
  size_t location_count() const { return locations_.size(); }

  // Serializes the profile (uncompressed protobuf bytes).
  std::string Encode() const;
  // Encode() then gzip, as pprof files are stored.
  std::string EncodeGzipped(int level = 6) const;

 private:
  struct Function {
    int64_t name, filename, start_line;
    bool operator==(const Function& o) const {
      return name == o.name && filename == o.filename && start_line == o.start_line;
    }
  };
  struct Location {
    uint64_t function_id;
    int64_t line;
  };
  struct FunctionHash {
    size_t operator()(const Function& f) const;
  };
  // intern_location runs once per frame of every distinct stack, so it gets
  // an open-addressing table too rather than a node-based map.
  struct LocationSlot {
    Location key;
    uint64_t id;  // 0 = empty slot
  };
  // Samples live back to back in one arena of 64-bit words, so that a
  // lookup touches one slot and one contiguous record (not a struct plus
  // three heap vectors); with ~1M add_sample calls, cache misses are the cost.
  // Record layout at its offset:
  //   [n_locations, n_labels, location ids..., labels (key, str, num,
  //    num_unit string indices/values; 4 words each)..., values...]
  struct SampleSlot {
    uint64_t hash;
    uint64_t offset_plus_one;  // 0 = empty slot
  };

  int64_t intern_string(std::string_view s);
  // The slot holding the sample with this stack and (encoded) labels, or the
  // empty slot where it belongs.
  size_t find_slot(uint64_t hash, const std::vector<uint64_t>& location_ids,
                   const std::vector<uint64_t>& label_words) const;
  void grow_sample_slots();

  std::vector<ValueType> sample_types_;
  std::vector<std::pair<int64_t, int64_t>> sample_type_ids_;  // (type, unit) string indices
  int64_t period_type_ids_[2];
  int64_t period_;
  int64_t mapping_filename_;
  int64_t default_sample_type_ = 0;  // string index; 0 = unset
  int64_t time_nanos_ = 0, duration_nanos_ = 0;
  std::vector<int64_t> comments_;

  std::deque<std::string> strings_;  // strings_[0] == ""; a deque so string_ids_' keys stay valid
  std::unordered_map<std::string_view, int64_t> string_ids_;
  std::vector<Function> functions_;
  std::unordered_map<Function, uint64_t, FunctionHash> function_ids_;
  std::vector<Location> locations_;
  std::vector<LocationSlot> location_slots_;  // power-of-two size
  std::vector<uint64_t> sample_data_;  // the records
  std::vector<size_t> samples_;  // record offsets, in first-insertion order
  std::vector<SampleSlot> sample_slots_;  // open addressing, power-of-two size
  std::vector<uint64_t> scratch_labels_;  // add_sample's encoded labels, reused across calls
};

}  // namespace fathom
