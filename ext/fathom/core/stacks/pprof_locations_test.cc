#include "stacks/pprof_locations.h"

#include <gtest/gtest.h>

#include <vector>

namespace fathom {
namespace {

std::vector<FrameSymbol> Symbols() {
  return {{"Foo#bar", "/app/foo.rb", 10, true}, {"<main>", "/app/main.rb", 1, true}, {"Foo#bar", "/app/foo.rb", 10, true}};
}

TEST(PprofLocationsTest, OneLocationPerFunctionAndLineLeafFirst) {
  std::vector<FrameSymbol> symbols = Symbols();
  PprofBuilder b({{"samples", "count"}}, {"samples", "count"}, 1);
  PprofLocations locations(b, &symbols);
  std::vector<uint64_t> out;
  locations.Append({{0, 11}, {1, 3}}, false, &out);
  EXPECT_EQ(out, (std::vector<uint64_t>{1, 2}));
  // Same function and line: the same location; a symbol with the same name,
  // file and first line is the same function.
  out.clear();
  locations.Append({{2, 11}, {0, 12}, {1, 3}}, false, &out);
  EXPECT_EQ(out, (std::vector<uint64_t>{1, 3, 2}));
  EXPECT_EQ(b.function_count(), 2u);
  EXPECT_EQ(b.location_count(), 3u);
}

TEST(PprofLocationsTest, TruncatedStacksEndInOneMarker) {
  std::vector<FrameSymbol> symbols = Symbols();
  PprofBuilder b({{"samples", "count"}}, {"samples", "count"}, 1);
  PprofLocations locations(b, &symbols);
  std::vector<uint64_t> first, second;
  locations.Append({{0, 11}}, true, &first);
  locations.Append({{1, 3}}, true, &second);
  ASSERT_EQ(first.size(), 2u);
  ASSERT_EQ(second.size(), 2u);
  EXPECT_EQ(first.back(), second.back());  // the marker, at the root end of both
  EXPECT_EQ(locations.Named(kTruncatedFrameName), first.back());
}

TEST(PprofLocationsTest, NamedFramesAndUnknownSymbols) {
  PprofBuilder b({{"samples", "count"}}, {"samples", "count"}, 1);
  PprofLocations names(b);
  uint64_t gc = names.Named("Garbage Collection");
  EXPECT_EQ(names.Named("Garbage Collection"), gc);
  EXPECT_NE(names.Named("(root: vm)"), gc);
  std::vector<uint64_t> out;
  names.Append({{7, 1}}, false, &out);  // no symbol table: nothing to name it by
  EXPECT_TRUE(out.empty());
}

}  // namespace
}  // namespace fathom
