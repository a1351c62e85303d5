#include "sample_store.h"

namespace fathom {

uint32_t SampleStore::AddPending(const SampleRecord& record) {
  uint32_t index;
  if (!free_slots_.empty()) {
    index = free_slots_.back();
    free_slots_.pop_back();
    records_[index] = record;
  } else {
    index = static_cast<uint32_t>(records_.size());
    records_.push_back(record);
  }
  records_[index].state = RecordState::kPending;
  pending_.push_back(index);
  in_use_++;
  return index;
}

void SampleStore::Recycle(uint32_t index) {
  SampleRecord& r = records_[index];
  if (r.state == RecordState::kFree) return;
  if (r.stack_id != StackTable::kNone) stacks_.Release(r.stack_id);
  r = SampleRecord{};
  free_slots_.push_back(index);
  in_use_--;
}

void SampleStore::Clear() {
  stacks_.Clear();
  live_objects_.Clear();
  records_.clear();
  free_slots_.clear();
  pending_.clear();
  in_use_ = 0;
  // Labels are kept: they are few and the ids stay valid.
}

}  // namespace fathom
