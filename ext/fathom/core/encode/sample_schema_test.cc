#include "encode/sample_schema.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>


namespace fathom {
namespace {

// A schema with a count, an estimate it stands behind and a largest value.
struct TestValues {
  int64_t hits_objects = 0;
  int64_t biggest = 0;
  int64_t hits_samples = 0;
  static constexpr SampleField<TestValues> kSchema[] = {
      {"hits_objects", "count", &TestValues::hits_objects},
      {"biggest", "bytes", &TestValues::biggest, Combine::kMax},
      {"hits_samples", "count", &TestValues::hits_samples, Combine::kSum, "hits_"},
  };
};
static_assert(CountsNamedForWhatTheyCount<TestValues>());

struct MisnamedCount {
  int64_t n = 0;
  static constexpr SampleField<MisnamedCount> kSchema[] = {{"records", "count", &MisnamedCount::n, Combine::kSum, "hits_"}};
};
static_assert(!CountsNamedForWhatTheyCount<MisnamedCount>());

TEST(SampleSchemaTest, TypesAndValuesInSchemaOrder) {
  std::vector<ValueType> types = SampleTypes<TestValues>();
  ASSERT_EQ(types.size(), 3u);
  EXPECT_EQ(types[1].type, "biggest");
  EXPECT_EQ(types[1].unit, "bytes");
  EXPECT_EQ(types[1].combine, Combine::kMax);
  std::vector<int64_t> out = {99};
  AppendValues(TestValues{4, 300, 2}, &out);
  EXPECT_EQ(out, (std::vector<int64_t>{4, 300, 2}));
}

TEST(SampleSchemaTest, RowsAddUpAsEachFieldSays) {
  TestValues row{4, 300, 2};
  AddValues(&row, TestValues{1, 100, 1});
  AddValues(&row, TestValues{2, 700, 1});
  EXPECT_EQ(row.hits_objects, 7);
  EXPECT_EQ(row.biggest, 700);
  EXPECT_EQ(row.hits_samples, 4);
}

TEST(SampleSchemaTest, CountCommentNamesWhatEachCountStandsBehind) {
  EXPECT_EQ(SampleCountComment(TestValues{7, 700, 4}), "Samples: 4 behind hits_* (per row: sample types hits_samples)");
  EXPECT_EQ(SampleCountComment(MisnamedCount{3}), "Samples: 3 behind hits_* (per row: sample types records)");
}

// PprofBuilder merges samples with the same stack and labels the same way.
TEST(SampleSchemaTest, BuilderMergesSamplesAsEachTypeSays) {
  PprofBuilder b(SampleTypes<TestValues>(), {"hits", "count"}, 1);
  uint64_t loc = b.intern_location(b.intern_function("f", "f.rb", 1), 2);
  std::vector<int64_t> values;
  AppendValues(TestValues{1, 500, 1}, &values);
  b.add_sample({loc}, values, {});
  AppendValues(TestValues{2, 200, 1}, &values);
  b.add_sample({loc}, values, {});
  EXPECT_EQ(b.sample_count(), 1u);
  std::string bytes = b.Encode();
  // Sample values are a packed varint field: 3, 500, 2 (merged).
  EXPECT_NE(bytes.find(std::string("\x12\x04\x03\xf4\x03\x02", 6)), std::string::npos);
}

}  // namespace
}  // namespace fathom
