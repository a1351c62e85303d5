#include "roots/vm_roots.h"

#include <algorithm>
#include <unordered_set>

namespace fathom {
namespace roots {

namespace {

constexpr const char* kVm = "vm";
constexpr const char* kGlobalList = "global_list";

// The chain of buckets from `head`, each with its entries, oldest bucket
// first (the head is the newest: rb_vm_register_global_object starts a
// new bucket in front when the head is full).
struct Bucket {
  uint64_t ref;
  std::vector<uint64_t> entries;
};

std::vector<Bucket> BucketChain(uint64_t head, VmRootsHeap& heap, std::unordered_set<uint64_t>* seen) {
  std::vector<Bucket> chain;
  std::vector<uint64_t> refs;
  for (uint64_t bucket = head;;) {
    if (!seen->insert(bucket).second) break;  // followed already: a loop in a damaged dump
    chain.push_back(Bucket{bucket, {}});
    refs.clear();
    heap.BucketReferences(bucket, &refs);
    uint64_t next = 0;
    bool has_next = false;
    for (uint64_t r : refs) {
      // Only buckets reference buckets (the `next` link), and entries are
      // never buckets: whatever is one is the chain.
      if (heap.IsPinnedObjectList(r)) {
        if (!has_next) next = r, has_next = true;
      } else {
        chain.back().entries.push_back(r);
      }
    }
    if (!has_next) break;
    bucket = next;
  }
  std::reverse(chain.begin(), chain.end());
  return chain;
}

}  // namespace

VmRootsReshape ReshapeVmRoots(std::vector<RootCategoryRefs>* categories, VmRootsHeap& heap) {
  VmRootsReshape result;
  auto vm = std::find_if(categories->begin(), categories->end(), [](const RootCategoryRefs& c) { return c.name == kVm; });
  if (vm == categories->end()) return result;
  std::vector<uint64_t>& refs = vm->refs;
  auto first_bucket = std::find_if(refs.begin(), refs.end(), [&](uint64_t r) { return heap.IsPinnedObjectList(r); });
  if (first_bucket == refs.end()) return result;  // 3.1-3.3: nothing to undo
  result.applied = true;

  // The registered addresses: after the leading Ractors, before the
  // buckets (rb_vm_mark marks them in that order). Moved only when no
  // "global_list" exists (which a Ruby with buckets does not report).
  size_t ractors = 0;
  while (refs.begin() + ractors != first_bucket && heap.IsRactor(refs[ractors])) ractors++;
  size_t bucket_at = static_cast<size_t>(first_bucket - refs.begin());
  bool has_global_list = std::any_of(categories->begin(), categories->end(),
                                     [](const RootCategoryRefs& c) { return c.name == kGlobalList; });
  std::vector<uint64_t> registered;
  std::vector<uint64_t> reshaped(refs.begin(), refs.begin() + ractors);
  if (has_global_list)
    reshaped.insert(reshaped.end(), refs.begin() + ractors, refs.begin() + bucket_at);
  else
    registered.assign(refs.begin() + ractors, refs.begin() + bucket_at);

  // Every bucket chain where its head was (3.4 reports one; a bucket
  // reported again, or already followed, is kept as a plain root).
  std::unordered_set<uint64_t> seen;
  for (size_t i = bucket_at; i < refs.size(); i++) {
    uint64_t r = refs[i];
    if (!heap.IsPinnedObjectList(r) || seen.count(r)) {
      reshaped.push_back(r);
      continue;
    }
    for (Bucket& b : BucketChain(r, heap, &seen)) {
      reshaped.push_back(b.ref);
      reshaped.insert(reshaped.end(), b.entries.begin(), b.entries.end());
      result.buckets++;
      result.pinned_entries += b.entries.size();
    }
  }
  refs.swap(reshaped);

  result.global_list = registered.size();
  if (!registered.empty()) {
    size_t after_vm = static_cast<size_t>(vm - categories->begin()) + 1;  // vm is invalidated by the insert
    categories->insert(categories->begin() + static_cast<std::ptrdiff_t>(after_vm),
                       RootCategoryRefs{kGlobalList, std::move(registered)});
  }
  return result;
}

}  // namespace roots
}  // namespace fathom
