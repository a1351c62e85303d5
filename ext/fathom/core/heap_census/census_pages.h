// CensusPages: which heap pages a sliced census has walked, and when.
//
// The flush's heap census (ruby/heap/live_census.h) walks Ruby's heap in
// slices of a bounded time, yielding the GVL between them, so that its
// pause does not grow with the heap. Ruby's heap iteration cannot be
// resumed where it stopped (on 3.2+ it visits each size pool's pages in
// list order, not address order, and a stop only ends the current pool),
// so every slice iterates again and skips the pages already walked: the
// set kept here. Each walked page also keeps the slice's stamp (the
// monotonic time the slice began): between slices other threads run and
// allocate, and an object allocated into a page after that page was walked
// is not in the census, so a sampled record is compared with the census
// only if it was committed before its page's stamp.
// docs/internals/heap.md, "A census in slices".
//
// Pure C++: the Ruby layer feeds it the pages Ruby's heap walk reports.
#pragma once

#include <cstddef>
#include <cstdint>
#include <unordered_set>
#include <vector>

namespace fathom {

class CensusPages {
 public:
  void Clear();
  // A page that exists as the census begins: the census walks these only.
  // A page Ruby adds later (other threads allocate between slices, GC is
  // off) holds only objects allocated after the census began, which no
  // record compared with it can be of (none has a stamp), so leaving it
  // out keeps both sides equal, and lets the census end however fast the
  // heap grows.
  void Expect(uint64_t begin) { expected_.insert(begin); }
  bool Expected(uint64_t begin) const { return expected_.count(begin) != 0; }
  size_t expected() const { return expected_.size(); }
  // Has a page starting at `begin` been walked in this census?
  bool Walked(uint64_t begin) const { return walked_.count(begin) != 0; }
  // The page [begin, end) was walked in the slice that began at `stamp`.
  void Add(uint64_t begin, uint64_t end, int64_t stamp);
  // Sorts the pages for StampAt; call once the census is complete.
  void Finish();
  // After Finish: the stamp of the walked page holding `address`, or false
  // when no walked page holds it.
  bool StampAt(uint64_t address, int64_t* stamp) const;
  size_t pages() const { return pages_.size(); }

 private:
  struct Page {
    uint64_t begin, end;
    int64_t stamp;
  };
  std::vector<Page> pages_;
  std::unordered_set<uint64_t> walked_, expected_;
  bool sorted_ = true;
};

// The time budget of one slice: a walk checks Expired() after each page
// and stops once it is, so a slice lasts its budget plus one page (a few
// µs). A budget of 0 means no limit (one slice: no other thread to yield
// to, or a heap small enough).
class SliceBudget {
 public:
  SliceBudget(int64_t started_ns, int64_t budget_ns) : deadline_(budget_ns > 0 ? started_ns + budget_ns : INT64_MAX) {}
  bool Expired(int64_t now_ns) const { return now_ns >= deadline_; }

 private:
  int64_t deadline_;
};

}  // namespace fathom
