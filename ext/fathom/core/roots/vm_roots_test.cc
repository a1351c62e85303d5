#include "roots/vm_roots.h"

#include <gtest/gtest.h>

#include <map>
#include <set>
#include <vector>

namespace fathom {
namespace roots {
namespace {

// A heap described by hand: which refs are buckets (with their references
// in marking order) and which are Ractors.
class FakeHeap : public VmRootsHeap {
 public:
  std::map<uint64_t, std::vector<uint64_t>> buckets;
  std::set<uint64_t> ractors;
  int reads = 0;

  bool IsPinnedObjectList(uint64_t ref) override { return buckets.count(ref) != 0; }
  bool IsRactor(uint64_t ref) override { return ractors.count(ref) != 0; }
  void BucketReferences(uint64_t bucket, std::vector<uint64_t>* out) override {
    reads++;
    const auto& refs = buckets.at(bucket);
    out->insert(out->end(), refs.begin(), refs.end());
  }
};

std::vector<RootCategoryRefs> Roots(std::vector<uint64_t> vm) {
  return {{"vm", std::move(vm)}, {"end_proc", {}}, {"global_tbl", {70}}, {"machine_context", {80, 81}}};
}

// 3.1-3.3: no bucket under "vm": nothing changes, not even "global_list".
TEST(VmRootsTest, RubiesWithoutBucketsAreLeftAsTheyAre) {
  FakeHeap heap;
  heap.ractors = {1};
  auto roots = Roots({1, 2, 3});
  roots.push_back({"global_list", {9}});
  auto before = roots;
  VmRootsReshape r = ReshapeVmRoots(&roots, heap);
  EXPECT_FALSE(r.applied);
  ASSERT_EQ(before.size(), roots.size());
  for (size_t i = 0; i < roots.size(); i++) {
    EXPECT_EQ(before[i].name, roots[i].name);
    EXPECT_EQ(before[i].refs, roots[i].refs);
  }
  std::vector<RootCategoryRefs> none;
  EXPECT_FALSE(ReshapeVmRoots(&none, heap).applied);
}

// 3.4: Ractor 1, registered addresses 10 and 11, the bucket chain 100 (the
// newest, head) -> 101 -> 102 (the oldest), then the load path etc. (20, 21).
TEST(VmRootsTest, BucketsAreFlattenedOldestFirstAndRegisteredAddressesGetTheirOwnCategory) {
  FakeHeap heap;
  heap.ractors = {1};
  heap.buckets[100] = {101, 50, 51};      // next, then its entries
  heap.buckets[101] = {102, 40, 41, 42};
  heap.buckets[102] = {30, 31};           // the oldest: no next
  auto roots = Roots({1, 10, 11, 100, 20, 21});
  VmRootsReshape r = ReshapeVmRoots(&roots, heap);
  EXPECT_TRUE(r.applied);
  EXPECT_EQ(3u, r.buckets);
  EXPECT_EQ(7u, r.pinned_entries);
  EXPECT_EQ(2u, r.global_list);
  ASSERT_EQ(5u, roots.size());
  EXPECT_EQ("vm", roots[0].name);
  EXPECT_EQ((std::vector<uint64_t>{1, 102, 30, 31, 101, 40, 41, 42, 100, 50, 51, 20, 21}), roots[0].refs);
  EXPECT_EQ("global_list", roots[1].name);
  EXPECT_EQ((std::vector<uint64_t>{10, 11}), roots[1].refs);
  EXPECT_EQ("end_proc", roots[2].name);
  EXPECT_EQ("global_tbl", roots[3].name);
  EXPECT_EQ((std::vector<uint64_t>{80, 81}), roots[4].refs);
}

// Nothing is lost or invented: the reshaped roots are the reported ones
// plus the buckets' entries.
TEST(VmRootsTest, EveryReportedRootStaysARoot) {
  FakeHeap heap;
  heap.ractors = {1, 2};
  heap.buckets[100] = {7, 8};
  auto roots = Roots({1, 2, 100, 20});
  auto before = roots;
  ReshapeVmRoots(&roots, heap);
  std::multiset<uint64_t> was, is;
  for (auto& c : before) was.insert(c.refs.begin(), c.refs.end());
  for (auto& c : roots) is.insert(c.refs.begin(), c.refs.end());
  was.insert({7, 8});
  EXPECT_EQ(was, is);
  EXPECT_EQ((std::vector<uint64_t>{1, 2, 100, 7, 8, 20}), roots[0].refs);
  EXPECT_EQ("end_proc", roots[1].name) << "no registered address: no global_list";
}

// A damaged dump: a bucket chain that loops, a bucket reported twice. Each
// bucket is read once, and the repeated root stays a plain root.
TEST(VmRootsTest, LoopsAndRepeatsAreFollowedOnce) {
  FakeHeap heap;
  heap.buckets[100] = {101, 5};
  heap.buckets[101] = {100, 6};
  auto roots = Roots({100, 20, 100});
  VmRootsReshape r = ReshapeVmRoots(&roots, heap);
  EXPECT_EQ(2, heap.reads);
  EXPECT_EQ(2u, r.buckets);
  EXPECT_EQ((std::vector<uint64_t>{101, 6, 100, 5, 20, 100}), roots[0].refs);
}

// A "global_list" that exists already keeps the registered addresses in "vm".
TEST(VmRootsTest, AnExistingGlobalListIsNotDuplicated) {
  FakeHeap heap;
  heap.buckets[100] = {5};
  auto roots = Roots({10, 100});
  roots.push_back({"global_list", {9}});
  VmRootsReshape r = ReshapeVmRoots(&roots, heap);
  EXPECT_EQ(0u, r.global_list);
  EXPECT_EQ((std::vector<uint64_t>{10, 100, 5}), roots[0].refs);
  EXPECT_EQ(5u, roots.size());
}

}  // namespace
}  // namespace roots
}  // namespace fathom
