#include "heap/sample_store.h"

#include <gtest/gtest.h>

#include "heap/heap_aggregate.h"

namespace fathom {
namespace {

constexpr bool kExact = true, kSampled = false;

// The record state machine as the Ruby layer drives it: hook (AddPending),
// commit (Commit), FREEOBJ (ObjectFreed), flush (DrainFreed, Report).
struct Store {
  SampleStore store;
  uint32_t stack, other_stack, label;

  explicit Store(bool exact) {
    store.set_exact(exact);
    uint64_t a[] = {0x100, 0x200};
    uint64_t b[] = {0x100, 0x300};
    int32_t lines[] = {1, 2};
    stack = store.stacks().Intern(a, lines, 2, false);
    other_stack = store.stacks().Intern(b, lines, 2, false);
    label = store.labels().Intern("String");
  }
  ~Store() {
    store.stacks().Release(stack);
    store.stacks().Release(other_stack);
  }

  uint32_t Sample(uint32_t on_stack, uint64_t object, uint64_t weight) {
    store.stacks().Retain(on_stack);  // the hook's Intern hands one over
    SampleRecord r;
    r.object = object;
    r.thread = 0x77;
    r.stack_id = on_stack;
    r.weight = weight;
    return store.AddPending(r);
  }
  bool Commit(uint32_t index, uint64_t bytes, uint64_t liveness_token = 0) {
    return store.Commit(index, CommitInfo{label, label, bytes, liveness_token});
  }
};

TEST(SampleStoreTest, CommitMakesPendingRecordsLive) {
  Store s(kSampled);
  uint32_t i = s.Sample(s.stack, 0x1000, 5);
  EXPECT_FALSE(s.store.is_live(i));
  ASSERT_EQ(s.store.pending().size(), 1u);
  EXPECT_TRUE(s.Commit(i, 40, 8));
  s.store.ClearPending();
  EXPECT_TRUE(s.store.is_live(i));
  EXPECT_EQ(s.store.at(i).liveness_token, 8u);  // sampled mode finds the object by its token
  EXPECT_EQ(s.store.at(i).object, 0x1000u);     // and keeps the address only to compare it
  EXPECT_EQ(s.store.at(i).thread, 0u);
  EXPECT_EQ(s.store.at(i).liveness_token, 8u);
  uint32_t untrackable = s.Sample(s.stack, 0x2000, 1);
  EXPECT_FALSE(s.Commit(untrackable, 40, 0));
}

TEST(SampleStoreTest, ReportWeighsValuesAndGivesAllocationsOnce) {
  Store s(kSampled);
  uint32_t i = s.Sample(s.stack, 0x1000, 5);
  s.Commit(i, 40, 8);
  s.store.ClearPending();
  {
    HeapAggregator rows(s.store.stacks());
    HeapValues v = s.store.Report(i, true, 48, &rows);
    EXPECT_EQ(v.alloc_objects, 5);
    EXPECT_EQ(v.alloc_space, 200);  // weight * size at commit
    EXPECT_EQ(v.inuse_objects, 5);
    EXPECT_EQ(v.inuse_space, 240);  // weight * size now
    EXPECT_EQ(v.alloc_samples, 1);  // one record behind both, whatever its weight
    EXPECT_EQ(v.inuse_samples, 1);
    ASSERT_EQ(rows.rows().size(), 1u);
  }
  {  // The next flush: still alive, its allocation already counted.
    HeapAggregator rows(s.store.stacks());
    HeapValues v = s.store.Report(i, true, 48, &rows);
    EXPECT_EQ(v.alloc_objects, 0);
    EXPECT_EQ(v.alloc_space, 0);
    EXPECT_EQ(v.alloc_samples, 0);
    EXPECT_EQ(v.inuse_objects, 5);
    EXPECT_EQ(v.inuse_samples, 1);
    EXPECT_TRUE(s.store.is_live(i));
  }
  {  // Dead now: nothing to add at all, and the record is recycled.
    HeapAggregator rows(s.store.stacks());
    HeapValues v = s.store.Report(i, false, 0, &rows);
    EXPECT_EQ(v.alloc_objects, 0);
    EXPECT_EQ(v.inuse_objects, 0);
    EXPECT_TRUE(rows.rows().empty());
    EXPECT_FALSE(s.store.is_live(i));
    EXPECT_EQ(s.store.live_count(), 0u);
  }
}

// A burst: the first record carries the gap since the previous burst, the
// others their skips; afterwards each carries an equal share of the sum.
TEST(SampleStoreTest, SpreadWeightSharesTheBurstsAllocationsExactly) {
  Store s(kSampled);
  uint32_t burst[] = {s.Sample(s.stack, 0x1000, 10000), s.Sample(s.stack, 0x1008, 3), s.Sample(s.other_stack, 0x1010, 4)};
  s.store.SpreadWeight(burst, 3);
  EXPECT_EQ(s.store.at(burst[0]).weight, 3336u);  // 10007 = 3335 * 3 + 2: the remainder goes first
  EXPECT_EQ(s.store.at(burst[1]).weight, 3336u);
  EXPECT_EQ(s.store.at(burst[2]).weight, 3335u);
  uint32_t one = s.Sample(s.stack, 0x1018, 7);
  s.store.SpreadWeight(&one, 1);  // a burst of one keeps its weight
  EXPECT_EQ(s.store.at(one).weight, 7u);
}

// Thinning at commit: a dropped candidate leaves no trace (its stack
// reference released, its slot free, skipped by the rest of the commit
// loop and by the mark function); a kept one carries its scaled weight.
TEST(SampleStoreTest, DropPendingForgetsTheCandidateAndSetWeightScalesAKeptOne) {
  Store s(kSampled);
  uint32_t dropped = s.Sample(s.stack, 0x4000, 3);
  uint32_t kept = s.Sample(s.stack, 0x4000, 3);
  s.store.DropPending(dropped);
  EXPECT_EQ(s.store.at(dropped).state, RecordState::kFree);
  EXPECT_EQ(s.store.live_count(), 1u);
  s.store.DropPending(dropped);  // twice is harmless
  EXPECT_EQ(s.store.live_count(), 1u);
  s.store.SetWeight(kept, 75);
  s.Commit(kept, 40, 16);
  s.store.ClearPending();
  HeapAggregator rows(s.store.stacks());
  HeapValues v = s.store.Report(kept, false, 0, &rows);
  EXPECT_EQ(v.alloc_objects, 75);
  EXPECT_EQ(v.alloc_space, 75 * 40);
  EXPECT_EQ(v.alloc_samples, 1);
  EXPECT_EQ(s.store.live_count(), 0u);
  uint32_t again = s.store.AddPending(SampleRecord{});
  EXPECT_TRUE(again == dropped || again == kept);  // slots reused
}

TEST(SampleStoreTest, DeadOnFirstReportGivesItsAllocationAndIsRecycled) {
  Store s(kSampled);
  uint32_t i = s.Sample(s.stack, 0x1000, 3);
  s.Commit(i, 100, 8);
  s.store.ClearPending();
  size_t stack_refs_before = s.store.stacks().stack_count();
  HeapAggregator rows(s.store.stacks());
  HeapValues v = s.store.Report(i, false, 0, &rows);
  EXPECT_EQ(v.alloc_objects, 3);
  EXPECT_EQ(v.alloc_space, 300);
  EXPECT_EQ(v.alloc_samples, 1);
  EXPECT_EQ(v.inuse_objects, 0);
  EXPECT_EQ(v.inuse_samples, 0);
  ASSERT_EQ(rows.rows().size(), 1u);  // the row keeps the stack alive
  EXPECT_EQ(s.store.stacks().stack_count(), stack_refs_before);
  EXPECT_EQ(s.store.live_count(), 0u);
  // The slot is reused by the next sample.
  EXPECT_EQ(s.Sample(s.other_stack, 0x2000, 1), i);
}

TEST(SampleStoreTest, ExactModeFollowsFreesThroughTheObjectMap) {
  Store s(kExact);
  uint32_t a = s.Sample(s.stack, 0x1000, 1);
  uint32_t b = s.Sample(s.stack, 0x2000, 1);
  s.Commit(a, 40);
  s.Commit(b, 40);
  s.store.ClearPending();
  EXPECT_EQ(s.store.at(a).object, 0x1000u);  // exact mode keeps the handle
  s.store.ObjectFreed(0x1000);
  s.store.ObjectFreed(0x9999);  // not ours: ignored
  EXPECT_TRUE(s.store.has_freed());
  EXPECT_FALSE(s.store.is_live(a));
  EXPECT_TRUE(s.store.is_live(b));
  EXPECT_EQ(s.store.DrainFreed(), 1u);
  EXPECT_EQ(s.store.live_count(), 1u);
  // Freeing the same object again (a reused address) finds nothing.
  s.store.ObjectFreed(0x1000);
  EXPECT_FALSE(s.store.has_freed());
}

TEST(SampleStoreTest, FreedRecordsFoldPerKeyUnlessAlreadyReported) {
  Store s(kExact);
  std::vector<uint32_t> idx;
  for (uint64_t k = 0; k < 6; k++) {
    idx.push_back(s.Sample(k < 4 ? s.stack : s.other_stack, 0x1000 + 40 * k, 2));
    s.Commit(idx.back(), 10);
  }
  s.store.ClearPending();
  {  // One record's allocation goes out in a flush while it is alive.
    HeapAggregator rows(s.store.stacks());
    s.store.Report(idx[0], true, 10, &rows);
  }
  for (uint64_t k = 0; k < 6; k++) s.store.ObjectFreed(0x1000 + 40 * k);
  EXPECT_EQ(s.store.DrainFreed(2), 2u);  // bounded batches
  EXPECT_EQ(s.store.DrainFreed(), 4u);
  EXPECT_EQ(s.store.live_count(), 0u);
  auto totals = s.store.TakeFreedTotals();
  ASSERT_EQ(totals.size(), 2u);
  SampleKey first{s.stack, s.label, s.label}, second{s.other_stack, s.label, s.label};
  EXPECT_EQ(totals.at(first).alloc_objects, 6);  // 3 records of weight 2: idx[0] was reported
  EXPECT_EQ(totals.at(first).alloc_space, 60);
  EXPECT_EQ(totals.at(second).alloc_objects, 4);
  HeapAggregator rows(s.store.stacks());
  rows.AddFreedTotals(std::move(totals));  // hands the stack references back
  EXPECT_TRUE(s.store.TakeFreedTotals().empty());
}

TEST(SampleStoreTest, RemapObjectsFollowsCompaction) {
  Store s(kExact);
  uint32_t a = s.Sample(s.stack, 0x1000, 1);
  s.Commit(a, 40);
  s.store.ClearPending();
  s.store.RemapObjects([](uint64_t h) { return h + 0x100000; });
  EXPECT_EQ(s.store.at(a).object, 0x101000u);
  s.store.ObjectFreed(0x1000);  // the old address is no longer ours
  EXPECT_FALSE(s.store.has_freed());
  s.store.ObjectFreed(0x101000);
  EXPECT_TRUE(s.store.has_freed());
}

// Exact mode after its FREEOBJ hook went (another profiler took it): the
// live records' objects may die unseen, so their handles are dropped and
// never followed again, by compaction or a flush. A record committed while
// unwatched keeps none either; WatchObjects (a restart) tracks new ones.
TEST(SampleStoreTest, ForgottenObjectsAreNeverFollowed) {
  Store s(kExact);
  uint32_t a = s.Sample(s.stack, 0x1000, 1);
  uint32_t pending = s.Sample(s.stack, 0x2000, 1);
  s.Commit(a, 40);
  s.store.ForgetObjects();
  s.Commit(pending, 40);  // the stop's commit, after the hook went
  s.store.ClearPending();
  EXPECT_TRUE(s.store.is_live(a));
  EXPECT_FALSE(s.store.object_known(a));
  EXPECT_FALSE(s.store.object_known(pending));
  std::vector<uint64_t> followed;
  s.store.RemapObjects([&](uint64_t h) { followed.push_back(h); return h; });
  EXPECT_TRUE(followed.empty());
  s.store.ObjectFreed(0x1000);  // a new object at the old address is not ours
  EXPECT_FALSE(s.store.has_freed());

  s.store.WatchObjects();
  uint32_t b = s.Sample(s.stack, 0x3000, 1);
  s.Commit(b, 40);
  s.store.ClearPending();
  EXPECT_TRUE(s.store.object_known(b));
  s.store.RemapObjects([&](uint64_t h) { followed.push_back(h); return h; });
  EXPECT_EQ(followed, std::vector<uint64_t>{0x3000});
  {  // The forgotten ones are reported dead and recycled.
    HeapAggregator rows(s.store.stacks());
    s.store.Report(a, false, 0, &rows);
    s.store.Report(pending, false, 0, &rows);
  }
  EXPECT_EQ(s.store.live_count(), 1u);
  s.store.ObjectFreed(0x3000);
  EXPECT_TRUE(s.store.has_freed());
}

// (Moved from stack_table_test.cc: the recycling now goes through Report.)
TEST(SampleStoreTest, PendingRecycleAndClear) {
  SampleStore store;
  uint64_t h[] = {0x100};
  int32_t l[] = {1};
  SampleRecord r;
  r.object = 0x4000;
  r.weight = 3;
  r.stack_id = store.stacks().Intern(h, l, 1, false);
  uint32_t i = store.AddPending(r);
  EXPECT_EQ(store.at(i).state, RecordState::kPending);
  EXPECT_EQ(store.pending().size(), 1u);
  EXPECT_EQ(store.live_count(), 1u);
  store.Commit(i, CommitInfo{0, 0, 8, 16});
  store.ClearPending();
  {
    HeapAggregator rows(store.stacks());
    store.Report(i, false, 0, &rows);
  }
  EXPECT_EQ(store.live_count(), 0u);
  EXPECT_EQ(store.stacks().stack_count(), 0u);  // the record held the only reference
  uint32_t j = store.AddPending(SampleRecord{});
  EXPECT_EQ(j, i);  // slot reused
  store.Clear();
  EXPECT_EQ(store.capacity(), 0u);
}

}  // namespace
}  // namespace fathom
