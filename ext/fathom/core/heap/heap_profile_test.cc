#include "heap/heap_encode.h"

#include <gtest/gtest.h>

#include "testing/external_tools.h"
#include "encode/pprof_builder.h"

namespace fathom {
namespace {

// A store with two allocation sites; frames are symbolized as the Ruby
// layer would do before copying the rows.
struct Fixture {
  SampleStore store;
  uint32_t keep_stack, drop_stack, string_label, main_label;

  Fixture() {
    store.set_exact(true);
    uint64_t keep[] = {0x100, 0x200, 0x300};
    uint64_t drop[] = {0x100, 0x400, 0x300};
    int32_t lines[] = {0, 5, 1};
    keep_stack = store.stacks().Intern(keep, lines, 3, false);
    drop_stack = store.stacks().Intern(drop, lines, 3, true);
    const char* names[] = {"String#*", "Keeper#keep", "<main>", "Dropper#drop"};
    uint64_t handles[] = {0x100, 0x200, 0x300, 0x400};
    for (uint32_t s : {keep_stack, drop_stack})
      for (uint32_t f : store.stacks().frames(s))
        for (int i = 0; i < 4; i++)
          if (store.stacks().frame_handle(f) == handles[i])
            store.stacks().SetSymbol(f, FrameSymbol{names[i], i == 0 ? "" : "app.rb", i, true});
    string_label = store.labels().Intern("String");
    main_label = store.labels().Intern("main");
  }

  // A committed record (the Ruby layer's CommitPending, minus Ruby).
  uint32_t AddLive(uint32_t stack, uint64_t object, uint64_t weight, uint64_t bytes) {
    store.stacks().Retain(stack);
    SampleRecord r;
    r.object = object;
    r.stack_id = stack;
    r.weight = weight;
    r.alloc_bytes = bytes;
    r.class_label = string_label;
    r.thread_label = main_label;
    uint32_t i = store.AddPending(r);
    store.Commit(i, CommitInfo{string_label, main_label, bytes, 0});
    store.ClearPending();
    return i;
  }
};

TEST(HeapProfileTest, FreedRecordsFoldIntoAllocTotalsInBatches) {
  Fixture fx;
  for (uint64_t i = 0; i < 10; i++) {
    fx.AddLive(fx.drop_stack, 0x10000 + i * 40, 2, 1000);
    fx.store.ObjectFreed(0x10000 + i * 40);  // what the FREEOBJ hook does
  }
  EXPECT_TRUE(fx.store.has_freed());
  EXPECT_EQ(fx.store.DrainFreed(4), 4u);  // bounded batches
  EXPECT_EQ(fx.store.DrainFreed(), 6u);
  EXPECT_FALSE(fx.store.has_freed());
  EXPECT_EQ(fx.store.live_count(), 0u);  // records recycled...

  HeapAggregator agg(fx.store.stacks());
  agg.AddFreedTotals(fx.store.TakeFreedTotals());
  ASSERT_EQ(agg.rows().size(), 1u);
  const HeapValues& v = agg.rows().begin()->second;
  EXPECT_EQ(v.alloc_objects, 20);  // ...but their weighted totals kept
  EXPECT_EQ(v.alloc_space, 20000);
  EXPECT_EQ(v.alloc_samples, 10);  // ten records stood behind them
  EXPECT_EQ(v.inuse_objects, 0);
}

TEST(HeapProfileTest, BatchedRowsEqualOneShot) {
  Fixture fx;
  HeapAggregator agg(fx.store.stacks());
  for (uint32_t t = 0; t < 50; t++) {
    uint32_t thread = fx.store.labels().Intern("thread " + std::to_string(t));
    agg.Add({t % 2 ? fx.keep_stack : fx.drop_stack, fx.string_label, thread}, HeapValues{1, 10, 1, 10});
  }
  HeapProfileRowsBuilder whole(fx.store, agg);
  ASSERT_TRUE(whole.Step(SIZE_MAX));
  HeapProfileRows one = whole.Take();
  HeapProfileRowsBuilder builder(fx.store, agg);
  int steps = 1;
  while (!builder.Step(7)) steps++;
  HeapProfileRows batched = builder.Take();
  EXPECT_EQ(steps, 8);
  ASSERT_EQ(batched.rows.size(), one.rows.size());
  EXPECT_EQ(batched.stacks.size(), 2u);
  EXPECT_EQ(batched.symbols.size(), 4u);  // shared frames copied once
  for (size_t i = 0; i < one.rows.size(); i++) {
    EXPECT_EQ(batched.rows[i].thread_label, one.rows[i].thread_label);
    EXPECT_EQ(batched.rows[i].values.inuse_space, one.rows[i].values.inuse_space);
  }
}

// The whole heap-profile encoding, read back by the reference reader.
TEST(HeapProfileTest, EncodedProfileReadsBackInGoPprof) {
  FATHOM_REQUIRE_TOOL("go");
  Fixture fx;
  fx.AddLive(fx.keep_stack, 0x5000, 3, 1024);
  HeapAggregator agg(fx.store.stacks());
  agg.Add({fx.keep_stack, fx.string_label, fx.main_label}, HeapValues{3, 3072, 3, 3072, 1, 1});
  agg.Add({fx.drop_stack, fx.string_label, fx.main_label}, HeapValues{5, 5000, 0, 0, 1, 0});
  HeapProfileRowsBuilder builder(fx.store, agg);
  ASSERT_TRUE(builder.Step(SIZE_MAX));
  HeapProfileRows rows = builder.Take();
  rows.time_nanos = 1700000000000000000;
  rows.duration_nanos = 2000000000;
  std::string gz = EncodeHeapProfile(rows);

  test_util::TempDir dir;
  std::string path = dir.path() + "/heap.pb.gz";
  test_util::WriteFile(path, gz);
  std::string env = "HOME=" + dir.path() + " GOCACHE=" + dir.path() + "/cache ";
  auto top = test_util::RunCommand(env + "go tool pprof -top -symbolize=none -sample_index=alloc_space " + path);
  ASSERT_EQ(top.exit_code, 0) << top.output;
  EXPECT_NE(top.output.find("Type: alloc_space"), std::string::npos) << top.output;
  EXPECT_NE(top.output.find("Dropper#drop"), std::string::npos) << top.output;
  auto raw = test_util::RunCommand(env + "go tool pprof -raw -symbolize=none " + path);
  ASSERT_EQ(raw.exit_code, 0) << raw.output;
  EXPECT_NE(raw.output.find("alloc_objects/count alloc_space/bytes inuse_objects/count inuse_space/bytes[dflt] "
                            "alloc_samples/count inuse_samples/count"),
            std::string::npos) << raw.output;
  // go tool pprof reads the sample counts like any other type.
  auto samples = test_util::RunCommand(env + "go tool pprof -top -symbolize=none -sample_index=inuse_samples " + path);
  ASSERT_EQ(samples.exit_code, 0) << samples.output;
  EXPECT_NE(samples.output.find("Type: inuse_samples"), std::string::npos) << samples.output;
  EXPECT_NE(raw.output.find("Samples: 2 behind alloc_*, 1 behind inuse_*"), std::string::npos) << raw.output;
  EXPECT_NE(raw.output.find("(truncated)"), std::string::npos) << raw.output;  // drop_stack was cut
  EXPECT_NE(raw.output.find("class:[String]"), std::string::npos) << raw.output;
  EXPECT_NE(raw.output.find("thread:[main]"), std::string::npos) << raw.output;
  EXPECT_NE(raw.output.find("Keeper#keep app.rb:5"), std::string::npos) << raw.output;
}

TEST(HeapProfileTest, StratifiedInuseValuesAreScaledToTheCensus) {
  Fixture fx;
  fx.store.set_exact(false);
  uint32_t a = fx.AddLive(fx.keep_stack, 0x1000, 100, 10041);
  uint32_t b = fx.AddLive(fx.drop_stack, 0x2000, 100, 10041);
  uint32_t plain = fx.AddLive(fx.drop_stack, 0x3000, 7, 40);
  Stratum big = StratumOf(0x5, 5, 10041);
  HeapAggregator agg(fx.store.stacks());
  fx.store.Report(a, true, 10041, &agg, big);
  fx.store.Report(b, true, 10041, &agg, big);
  fx.store.Report(plain, true, 40, &agg);  // no stratum: its plain estimate
  LiveStrata strata;
  for (int i = 0; i < 300; i++) strata.AddCensus(big, 10041);  // the truth: 300 live, estimate 200
  agg.CollectSampled(&strata);
  agg.ApplyStrata(strata);
  SampleKey keep{fx.keep_stack, fx.string_label, fx.main_label}, drop{fx.drop_stack, fx.string_label, fx.main_label};
  const HeapValues& k = agg.rows().at(keep);
  EXPECT_EQ(k.inuse_objects, 150);
  EXPECT_EQ(k.inuse_space, 150 * 10041);
  EXPECT_EQ(k.inuse_samples, 1);
  EXPECT_EQ(k.alloc_objects, 100);  // allocation values are not calibrated
  const HeapValues& d = agg.rows().at(drop);
  EXPECT_EQ(d.inuse_objects, 150 + 7);
  EXPECT_EQ(d.inuse_space, 150 * 10041 + 7 * 40);
  EXPECT_EQ(d.inuse_samples, 2);
}

TEST(HeapProfileTest, UnsampledStrataBecomeRowsOfTheirOwn) {
  LiveStrata strata;
  Stratum s = StratumOf(0x77, 5, 16500);
  for (int i = 0; i < 4; i++) strata.AddCensus(s, 16500);
  HeapProfileRows rows;
  rows.labels = {""};
  AddUnsampledStrataRows(strata, [](const Stratum& st) { return st.klass == 0x77 ? "String" : "?"; }, &rows);
  ASSERT_EQ(rows.rows.size(), 1u);
  const HeapProfileRows::Row& row = rows.rows[0];
  EXPECT_EQ(row.values.inuse_objects, 4);
  EXPECT_EQ(row.values.inuse_space, 4 * 16500);
  EXPECT_EQ(row.values.inuse_samples, 0);
  EXPECT_EQ(row.values.alloc_objects, 0);
  EXPECT_EQ(rows.labels[row.class_label], "String");
  EXPECT_EQ(rows.symbols[rows.stacks[row.stack][0].symbol].name, "[not sampled] String 16 KB-20 KB");
  EXPECT_FALSE(rows.truncated[row.stack]);
}

}  // namespace
}  // namespace fathom
