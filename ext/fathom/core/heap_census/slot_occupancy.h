// SlotOccupancy: which heap slots held an object when the in-use window
// began, so that the flush's heap census can tell objects certainly
// allocated in the window from the rest.
//
// A slot that was free at the start (or on a page that did not exist then)
// and holds an object at the flush holds an object allocated in the window:
// objects do not move unless Ruby compacts, which the caller checks. A slot
// that was occupied at the start is ambiguous at the flush (the same old
// object, or a new one in a slot its predecessor left), and the census
// leaves it out. So "certainly new" errs only towards "ambiguous", never
// the other way. A slot seen free later (a walk after a GC) is cleared with
// MarkFree: its start-time occupant is dead. See docs/internals/heap.md, "Calibrating live bytes to a heap
// census".
//
// One bit per slot: a heap of 1M slots costs 125 KB. Pure C++: the Ruby
// layer feeds it the pages and slots Ruby's heap walk reports.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace fathom {

class SlotOccupancy {
 public:
  void Clear();
  // A heap page of slots `stride` bytes apart in [begin, end). Returns its
  // index for MarkOccupied. Pages may come in any order.
  size_t AddPage(uint64_t begin, uint64_t end, uint64_t stride);
  void MarkOccupied(size_t page, uint64_t address);
  // Sorts the pages for lookups; call once all pages are in and marked
  // (page indices from AddPage are not valid after it).
  void Finish();

  // Did the slot at `address` hold an object at the start? False for an
  // address on no page of the start. An address that is not a slot
  // boundary of its page counts as occupied (ambiguous), never as free.
  bool WasOccupied(uint64_t address) const;

  // After Finish: the slot at `address` was seen free since the start, so
  // whatever it holds later was allocated later (its start-time occupant
  // died). A no-op for addresses on no page of the start.
  void MarkFree(uint64_t address);

  // Per-page access for walks that visit a page's slots in order: the start
  // page that is exactly [begin, end) with this stride, or kNoPage (the
  // page is new, or not the same page). Then slot i of that page.
  static constexpr size_t kNoPage = SIZE_MAX;
  size_t FindPage(uint64_t begin, uint64_t end, uint64_t stride) const;
  bool SlotWasOccupied(size_t page, size_t slot) const {
    size_t bit = pages_[page].first_bit + slot;
    return (bits_[bit / 64] >> (bit % 64)) & 1;
  }
  void MarkSlotFree(size_t page, size_t slot);

  bool empty() const { return pages_.empty(); }
  size_t pages() const { return pages_.size(); }
  size_t occupied() const { return occupied_; }
  size_t slots() const { return slots_; }

 private:
  struct Page {
    uint64_t begin, end, stride;
    size_t first_bit;
  };
  // The bit of the slot at address: SIZE_MAX on no page, SIZE_MAX - 1 off
  // a slot boundary.
  size_t BitOf(uint64_t address) const;
  // Set / clear one slot's bit, keeping occupied_ in step.
  void SetBit(size_t bit);
  void ClearBit(size_t bit);

  std::vector<Page> pages_;
  std::vector<uint64_t> bits_;
  size_t slots_ = 0;
  size_t occupied_ = 0;
  bool sorted_ = true;
};

}  // namespace fathom
