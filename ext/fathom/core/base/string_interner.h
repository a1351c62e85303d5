// StringInterner: maps strings to dense 32-bit ids and back. Used for sample
// labels (class names, thread names), which are few and long-lived, so ids
// are never recycled.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace fathom {

class StringInterner {
 public:
  StringInterner() { Intern(""); }  // id 0 is the empty string

  uint32_t Intern(std::string_view s) {
    auto it = ids_.find(std::string(s));
    if (it != ids_.end()) return it->second;
    uint32_t id = static_cast<uint32_t>(strings_.size());
    strings_.emplace_back(s);
    ids_.emplace(strings_.back(), id);
    return id;
  }

  const std::string& Get(uint32_t id) const { return strings_[id]; }
  const std::vector<std::string>& strings() const { return strings_; }
  size_t size() const { return strings_.size(); }

 private:
  std::vector<std::string> strings_;
  std::unordered_map<std::string, uint32_t> ids_;
};

}  // namespace fathom
