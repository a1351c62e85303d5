#include "heap_census/slot_occupancy.h"

#include <algorithm>
#include <cstdint>

namespace fathom {

void SlotOccupancy::Clear() {
  pages_.clear();
  bits_.clear();
  slots_ = 0;
  occupied_ = 0;
  sorted_ = true;
}

size_t SlotOccupancy::AddPage(uint64_t begin, uint64_t end, uint64_t stride) {
  if (stride == 0 || end < begin) stride = 1, end = begin;  // an empty page: no slot
  size_t count = static_cast<size_t>((end - begin) / stride);
  pages_.push_back(Page{begin, end, stride, slots_});
  slots_ += count;
  bits_.resize((slots_ + 63) / 64, 0);
  sorted_ = false;
  return pages_.size() - 1;
}

void SlotOccupancy::SetBit(size_t bit) {
  uint64_t mask = uint64_t{1} << (bit % 64);
  if (bits_[bit / 64] & mask) return;
  bits_[bit / 64] |= mask;
  occupied_++;
}

void SlotOccupancy::ClearBit(size_t bit) {
  uint64_t mask = uint64_t{1} << (bit % 64);
  if (!(bits_[bit / 64] & mask)) return;
  bits_[bit / 64] &= ~mask;
  occupied_--;
}

void SlotOccupancy::MarkOccupied(size_t page, uint64_t address) {
  const Page& p = pages_[page];
  if (address < p.begin || address >= p.end) return;
  SetBit(p.first_bit + static_cast<size_t>((address - p.begin) / p.stride));
}

void SlotOccupancy::Finish() {
  std::sort(pages_.begin(), pages_.end(), [](const Page& a, const Page& b) { return a.begin < b.begin; });
  sorted_ = true;
}

size_t SlotOccupancy::FindPage(uint64_t begin, uint64_t end, uint64_t stride) const {
  if (!sorted_) return kNoPage;
  auto it = std::lower_bound(pages_.begin(), pages_.end(), begin, [](const Page& p, uint64_t b) { return p.begin < b; });
  if (it == pages_.end() || it->begin != begin || it->end != end || it->stride != stride) return kNoPage;
  return static_cast<size_t>(it - pages_.begin());
}

void SlotOccupancy::MarkSlotFree(size_t page, size_t slot) { ClearBit(pages_[page].first_bit + slot); }

size_t SlotOccupancy::BitOf(uint64_t address) const {
  auto it = std::upper_bound(pages_.begin(), pages_.end(), address,
                             [](uint64_t a, const Page& p) { return a < p.begin; });
  if (it == pages_.begin()) return SIZE_MAX;
  const Page& p = *--it;
  if (address >= p.end) return SIZE_MAX;
  uint64_t offset = address - p.begin;
  if (offset % p.stride != 0) return SIZE_MAX - 1;
  return p.first_bit + static_cast<size_t>(offset / p.stride);
}

bool SlotOccupancy::WasOccupied(uint64_t address) const {
  if (!sorted_) return true;  // not finished: nothing is certain
  size_t bit = BitOf(address);
  if (bit == SIZE_MAX) return false;    // on no page of the start
  if (bit == SIZE_MAX - 1) return true; // not a slot boundary: cannot tell
  return (bits_[bit / 64] >> (bit % 64)) & 1;
}

void SlotOccupancy::MarkFree(uint64_t address) {
  if (!sorted_) return;
  size_t bit = BitOf(address);
  if (bit < SIZE_MAX - 1) ClearBit(bit);
}

}  // namespace fathom
