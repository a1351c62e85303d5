// What a Profile's threads share (categories, marker schemas, the range):
// internal to firefox_profile.cc, which builds it, and
// firefox_profile_json.cc, which writes it.
#pragma once

#include <optional>
#include <string>
#include <unordered_set>
#include <utility>
#include <vector>

#include "firefox/firefox_profile.h"

namespace fathom {
namespace firefox {
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

}  // namespace firefox
}  // namespace fathom
