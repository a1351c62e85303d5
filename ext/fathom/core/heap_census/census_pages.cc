// See census_pages.h.
#include "heap_census/census_pages.h"

#include <algorithm>

namespace fathom {

void CensusPages::Clear() {
  pages_.clear();
  walked_.clear();
  expected_.clear();
  sorted_ = true;
}

void CensusPages::Add(uint64_t begin, uint64_t end, int64_t stamp) {
  if (!walked_.insert(begin).second) return;  // walked already: keep the first stamp
  pages_.push_back(Page{begin, end, stamp});
  sorted_ = false;
}

void CensusPages::Finish() {
  std::sort(pages_.begin(), pages_.end(), [](const Page& a, const Page& b) { return a.begin < b.begin; });
  sorted_ = true;
}

bool CensusPages::StampAt(uint64_t address, int64_t* stamp) const {
  if (!sorted_) return false;  // not finished: nothing is certain
  auto it = std::upper_bound(pages_.begin(), pages_.end(), address,
                             [](uint64_t a, const Page& p) { return a < p.begin; });
  if (it == pages_.begin()) return false;
  --it;
  if (address >= it->end) return false;
  *stamp = it->stamp;
  return true;
}

}  // namespace fathom
