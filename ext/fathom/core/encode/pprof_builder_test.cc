#include "encode/pprof_builder.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "testing/external_tools.h"
#include "encode/protobuf_writer.h"
#include "testing/gunzip.h"

namespace fathom {
namespace {

using test_util::RunCommand;
using test_util::ShellQuote;
using test_util::TempDir;
using test_util::TextMessage;

// ---------------------------------------------------------------------------
// ProtoWriter: byte-exact checks against hand-computed encodings.

std::string Hex(const std::string& bytes) {
  static const char* kDigits = "0123456789abcdef";
  std::string out;
  for (unsigned char c : bytes) {
    if (!out.empty()) out += ' ';
    out += kDigits[c >> 4];
    out += kDigits[c & 15];
  }
  return out;
}

TEST(ProtoWriterTest, Varints) {
  ProtoWriter w;
  w.Varint(0);
  w.Varint(1);
  w.Varint(127);
  w.Varint(128);
  w.Varint(300);
  EXPECT_EQ(Hex(w.data()), "00 01 7f 80 01 ac 02");
  EXPECT_EQ(ProtoWriter::VarintSize(0), 1u);
  EXPECT_EQ(ProtoWriter::VarintSize(127), 1u);
  EXPECT_EQ(ProtoWriter::VarintSize(128), 2u);
  EXPECT_EQ(ProtoWriter::VarintSize(UINT64_MAX), 10u);
}

TEST(ProtoWriterTest, NegativeInt64IsTenBytes) {
  ProtoWriter w;
  w.Int64(1, -1);
  EXPECT_EQ(Hex(w.data()), "08 ff ff ff ff ff ff ff ff ff 01");
}

TEST(ProtoWriterTest, OptionalScalarsSkipZero) {
  ProtoWriter w;
  w.Int64Opt(1, 0);
  w.Uint64Opt(2, 0);
  w.BoolOpt(3, false);
  EXPECT_EQ(w.size(), 0u);
  w.Int64Opt(1, 150);
  w.BoolOpt(3, true);
  EXPECT_EQ(Hex(w.data()), "08 96 01 18 01");
}

TEST(ProtoWriterTest, StringsAndPackedVarints) {
  ProtoWriter w;
  w.Bytes(2, "testing");
  w.Bytes(6, "");
  std::vector<uint64_t> xs = {3, 270, 86942};
  w.PackedVarints(4, xs);
  w.PackedVarints(5, std::vector<int64_t>{});  // empty: omitted
  EXPECT_EQ(Hex(w.data()), "12 07 74 65 73 74 69 6e 67 32 00 22 06 03 8e 02 9e a7 05");
}

TEST(ProtoWriterTest, NestedMessagesGetTheirLengthPrefix) {
  ProtoWriter w;
  w.Uint64(1, 7);
  size_t outer = w.StartMessage();
  size_t inner = w.StartMessage();
  w.Uint64(1, 150);
  w.EndMessage(3, inner);
  w.Bytes(2, "ab");
  w.EndMessage(5, outer);
  // 08 07 | 2a <len 9> [ 1a 03 [08 96 01] 12 02 61 62 ]
  EXPECT_EQ(Hex(w.data()), "08 07 2a 09 1a 03 08 96 01 12 02 61 62");
}

TEST(ProtoWriterTest, LongNestedMessageUsesMultiByteLength) {
  ProtoWriter w;
  size_t m = w.StartMessage();
  w.Bytes(1, std::string(200, 'x'));  // 1 + 2 + 200 = 203 bytes of body
  w.EndMessage(2, m);
  ASSERT_EQ(w.size(), 1u + 2u + 203u);
  EXPECT_EQ(Hex(w.data().substr(0, 6)), "12 cb 01 0a c8 01");
  EXPECT_EQ(w.data().substr(6), std::string(200, 'x'));
}

// ---------------------------------------------------------------------------
// Builder: interning, merging, validation.

PprofBuilder TwoTypeBuilder() {
  return PprofBuilder({{"alloc_objects", "count"}, {"alloc_space", "bytes"}}, {"space", "bytes"}, 1);
}

TEST(PprofBuilderTest, InternsFunctionsByFullTuple) {
  PprofBuilder b = TwoTypeBuilder();
  uint64_t f = b.intern_function("Foo#bar", "foo.rb", 3);
  EXPECT_EQ(f, 1u);
  EXPECT_EQ(b.intern_function("Foo#bar", "foo.rb", 3), f);
  EXPECT_EQ(b.intern_function("Foo#baz", "foo.rb", 3), 2u);
  EXPECT_EQ(b.intern_function("Foo#bar", "other.rb", 3), 3u);
  EXPECT_EQ(b.intern_function("Foo#bar", "foo.rb", 4), 4u);
  EXPECT_EQ(b.intern_function("Foo#bar", "foo.rb", 3), f);
  EXPECT_EQ(b.function_count(), 4u);
}

TEST(PprofBuilderTest, InternsLocationsByFunctionAndLine) {
  PprofBuilder b = TwoTypeBuilder();
  uint64_t f1 = b.intern_function("a", "a.rb", 1);
  uint64_t f2 = b.intern_function("b", "b.rb", 1);
  EXPECT_EQ(b.intern_location(f1, 10), 1u);
  EXPECT_EQ(b.intern_location(f1, 11), 2u);
  EXPECT_EQ(b.intern_location(f2, 10), 3u);
  EXPECT_EQ(b.intern_location(f1, 10), 1u);
  EXPECT_EQ(b.intern_location(f2, 10), 3u);
  EXPECT_EQ(b.location_count(), 3u);
}

TEST(PprofBuilderTest, MergesSamplesWithSameStackAndLabels) {
  PprofBuilder b = TwoTypeBuilder();
  uint64_t f = b.intern_function("a", "a.rb", 1);
  uint64_t l1 = b.intern_location(f, 1), l2 = b.intern_location(f, 2);
  auto cls = [](const char* c) { return Label::String("class", c); };

  b.add_sample({l1, l2}, {1, 10}, {cls("String")});
  b.add_sample({l1, l2}, {2, 20}, {cls("String")});
  EXPECT_EQ(b.sample_count(), 1u);

  b.add_sample({l2, l1}, {1, 1}, {cls("String")});  // other order
  b.add_sample({l1}, {1, 1}, {cls("String")});      // prefix
  b.add_sample({l1, l2}, {1, 1}, {cls("Array")});   // other label value
  b.add_sample({l1, l2}, {1, 1}, {});               // no labels
  EXPECT_EQ(b.sample_count(), 5u);

  // Label order matters; str vs num and num units are distinguished.
  b.add_sample({l1, l2}, {1, 1}, {cls("String"), Label::String("thread", "main")});
  b.add_sample({l1, l2}, {1, 1}, {Label::String("thread", "main"), cls("String")});
  b.add_sample({l1, l2}, {1, 1}, {Label::Number("n", 5)});
  b.add_sample({l1, l2}, {1, 1}, {Label::Number("n", 5, "bytes")});
  b.add_sample({l1, l2}, {1, 1}, {Label::Number("n", 6, "bytes")});
  EXPECT_EQ(b.sample_count(), 10u);
  b.add_sample({l1, l2}, {1, 1}, {Label::Number("n", 5, "bytes")});
  b.add_sample({}, {1, 1}, {});  // an empty stack is a valid sample
  b.add_sample({}, {1, 1}, {});
  EXPECT_EQ(b.sample_count(), 11u);
}

TEST(PprofBuilderTest, ManyDistinctSamplesSurviveTableGrowth) {
  PprofBuilder b = TwoTypeBuilder();
  uint64_t f = b.intern_function("a", "a.rb", 1);
  std::vector<uint64_t> locs;
  for (int i = 0; i < 100; i++) locs.push_back(b.intern_location(f, i));
  for (int round = 0; round < 3; round++)
    for (int i = 0; i < 100; i++)
      for (int j = 0; j < 100; j++) b.add_sample({locs[i], locs[j]}, {1, i * 100 + j}, {});
  EXPECT_EQ(b.sample_count(), 10000u);
}

TEST(PprofBuilderTest, RejectsWrongValueCount) {
  PprofBuilder b = TwoTypeBuilder();
  uint64_t l = b.intern_location(b.intern_function("a", "a.rb", 1), 1);
  EXPECT_THROW(b.add_sample({l}, {1}, {}), std::invalid_argument);
  EXPECT_THROW(b.add_sample({l}, {1, 2, 3}, {}), std::invalid_argument);
  EXPECT_THROW(b.add_sample({l}, {}, {}), std::invalid_argument);
  EXPECT_EQ(b.sample_count(), 0u);
  b.add_sample({l}, {1, 2}, {});
  EXPECT_THROW(b.add_sample({l}, {1}, {}), std::invalid_argument);  // also when it would merge
  EXPECT_EQ(b.sample_count(), 1u);
}

TEST(PprofBuilderTest, RejectsUnknownIds) {
  PprofBuilder b = TwoTypeBuilder();
  uint64_t f = b.intern_function("a", "a.rb", 1);
  EXPECT_THROW(b.intern_location(0, 1), std::invalid_argument);
  EXPECT_THROW(b.intern_location(f + 1, 1), std::invalid_argument);
  uint64_t l = b.intern_location(f, 1);
  EXPECT_THROW(b.add_sample({l, 0}, {1, 1}, {}), std::invalid_argument);
  EXPECT_THROW(b.add_sample({l + 1}, {1, 1}, {}), std::invalid_argument);
  EXPECT_THROW(b.add_sample({l}, {1, 1}, {Label::String("", "x")}), std::invalid_argument);
  EXPECT_EQ(b.sample_count(), 0u);
  EXPECT_EQ(b.location_count(), 1u);
}

TEST(PprofBuilderTest, DefaultSampleTypeMustBeASampleType) {
  PprofBuilder b = TwoTypeBuilder();
  EXPECT_THROW(b.set_default_sample_type("inuse_space"), std::invalid_argument);
  EXPECT_THROW(b.set_default_sample_type("bytes"), std::invalid_argument);  // a unit, not a type
  EXPECT_NO_THROW(b.set_default_sample_type("alloc_space"));
  EXPECT_NO_THROW(b.set_default_sample_type(""));
}

// The small profile that the external-reader tests check field by field.
PprofBuilder BuildRichProfile() {
  PprofBuilder b({{"alloc_objects", "count"}, {"alloc_space", "bytes"}}, {"space", "bytes"}, 524288);
  b.set_default_sample_type("alloc_space");
  b.set_time(1700000000123456789LL, 2500000000LL);
  b.add_comment("fathom test");
  b.add_comment("second comment");
  uint64_t main_fn = b.intern_function("<main>", "/app/main.rb", 1);
  uint64_t block_fn = b.intern_function("block in Foo#bar", "/app/foo.rb", 10);
  uint64_t baz_fn = b.intern_function("Foo::Bar#baz", "/app/foo/bar.rb", 20);
  uint64_t main5 = b.intern_location(main_fn, 5);
  uint64_t block12 = b.intern_location(block_fn, 12);
  uint64_t baz22 = b.intern_location(baz_fn, 22);
  uint64_t baz25 = b.intern_location(baz_fn, 25);
  // Leaf first.
  b.add_sample({baz22, block12, main5}, {1, 40}, {Label::String("class", "String")});
  b.add_sample({baz25, block12, main5}, {1, 1000},
               {Label::String("class", "Array"), Label::Number("bytes", 1000, "bytes")});
  b.add_sample({baz22, block12, main5}, {2, 80}, {Label::String("class", "String")});  // merges
  b.add_sample({baz22, block12, main5}, {5, 5}, {Label::String("class", "Hash")});
  b.add_sample({main5}, {7, 700}, {Label::Number("depth", -3)});
  return b;
}

TEST(PprofBuilderTest, EncodingIsDeterministic) {
  PprofBuilder a = BuildRichProfile(), b = BuildRichProfile();
  std::string bytes = a.Encode();
  EXPECT_EQ(bytes, a.Encode());
  EXPECT_EQ(bytes, b.Encode());
  EXPECT_EQ(GzipDecompress(a.EncodeGzipped()), bytes);
  EXPECT_EQ(a.sample_count(), 4u);
  EXPECT_EQ(a.function_count(), 3u);
  EXPECT_EQ(a.location_count(), 4u);
}

// ---------------------------------------------------------------------------
// protoc --decode as an independent reader of the raw protobuf.

std::optional<TextMessage> DecodeWithProtoc(const std::string& bytes) {
  TempDir dir;
  std::string in = dir.file("profile.pb");
  test_util::WriteFile(in, bytes);
  std::string cmd = "protoc --decode perftools.profiles.Profile -I " + ShellQuote(FATHOM_PPROF_PROTO_DIR) +
                    " profile.proto < " + ShellQuote(in);
  test_util::CommandResult r = RunCommand(cmd);
  if (r.exit_code != 0) {
    ADD_FAILURE() << "protoc failed (" << r.exit_code << "):\n" << r.output;
    return std::nullopt;
  }
  return test_util::ParseTextFormat(r.output);
}

// Resolves a decoded profile's string-table indices and ids.
struct Decoded {
  TextMessage p;
  std::vector<std::string> strings;

  explicit Decoded(TextMessage msg) : p(std::move(msg)), strings(p.all("string_table")) {}

  std::string str(int64_t i) const {
    if (i < 0 || static_cast<size_t>(i) >= strings.size()) {
      ADD_FAILURE() << "string index out of range: " << i;
      return "<bad>";
    }
    return strings[static_cast<size_t>(i)];
  }
  const TextMessage* by_id(const char* kind, int64_t id) const {
    for (const TextMessage& m : p.children(kind))
      if (m.num("id") == id) return &m;
    ADD_FAILURE() << "no " << kind << " with id " << id;
    return nullptr;
  }
  // "name:line" for each location of a sample, leaf first.
  std::vector<std::string> stack(const TextMessage& sample) const {
    std::vector<std::string> out;
    for (const std::string& id : sample.all("location_id")) {
      const TextMessage* loc = by_id("location", std::stoll(id));
      if (loc == nullptr || loc->children("line").size() != 1) {
        out.push_back("<bad location>");
        continue;
      }
      const TextMessage& line = loc->children("line")[0];
      const TextMessage* fn = by_id("function", line.num("function_id"));
      out.push_back((fn ? str(fn->num("name")) : "<bad function>") + ":" + std::to_string(line.num("line")));
    }
    return out;
  }
  // "key=str" or "key=num unit", in order.
  std::vector<std::string> labels(const TextMessage& sample) const {
    std::vector<std::string> out;
    for (const TextMessage& l : sample.children("label")) {
      std::string s = str(l.num("key")) + "=";
      if (l.num("str") != 0)
        s += str(l.num("str"));
      else
        s += std::to_string(l.num("num")) + (l.num("num_unit") ? " " + str(l.num("num_unit")) : "");
      out.push_back(s);
    }
    return out;
  }
  std::vector<int64_t> values(const TextMessage& sample) const {
    std::vector<int64_t> out;
    for (const std::string& v : sample.all("value")) out.push_back(std::stoll(v));
    return out;
  }
};

TEST(PprofBuilderProtocTest, EveryFieldRoundTrips) {
  FATHOM_REQUIRE_TOOL("protoc");
  FATHOM_REQUIRE_FILE(FATHOM_PPROF_PROTO_DIR "/profile.proto");
  std::optional<TextMessage> msg = DecodeWithProtoc(BuildRichProfile().Encode());
  ASSERT_TRUE(msg.has_value());
  Decoded d(std::move(*msg));

  // String table: "" first, no duplicates.
  ASSERT_FALSE(d.strings.empty());
  EXPECT_EQ(d.strings[0], "");
  EXPECT_EQ(std::set<std::string>(d.strings.begin(), d.strings.end()).size(), d.strings.size());

  const auto& types = d.p.children("sample_type");
  ASSERT_EQ(types.size(), 2u);
  EXPECT_EQ(d.str(types[0].num("type")), "alloc_objects");
  EXPECT_EQ(d.str(types[0].num("unit")), "count");
  EXPECT_EQ(d.str(types[1].num("type")), "alloc_space");
  EXPECT_EQ(d.str(types[1].num("unit")), "bytes");

  const auto& period_type = d.p.children("period_type");
  ASSERT_EQ(period_type.size(), 1u);
  EXPECT_EQ(d.str(period_type[0].num("type")), "space");
  EXPECT_EQ(d.str(period_type[0].num("unit")), "bytes");
  EXPECT_EQ(d.p.num("period"), 524288);
  EXPECT_EQ(d.p.num("time_nanos"), 1700000000123456789LL);
  EXPECT_EQ(d.p.num("duration_nanos"), 2500000000LL);
  EXPECT_EQ(d.str(d.p.num("default_sample_type")), "alloc_space");
  std::vector<std::string> comments;
  for (const std::string& c : d.p.all("comment")) comments.push_back(d.str(std::stoll(c)));
  EXPECT_EQ(comments, (std::vector<std::string>{"fathom test", "second comment"}));

  const auto& mappings = d.p.children("mapping");
  ASSERT_EQ(mappings.size(), 1u);
  EXPECT_EQ(mappings[0].num("id"), 1);
  EXPECT_EQ(d.str(mappings[0].num("filename")), "ruby");
  EXPECT_EQ(mappings[0].get("has_functions"), "true");

  // Functions, in first-use order, with ids 1..n.
  const auto& fns = d.p.children("function");
  ASSERT_EQ(fns.size(), 3u);
  struct F {
    std::string name, system_name, filename;
    int64_t start_line;
  };
  // system_name is empty (pprof_builder.h: pprof would rewrite the name).
  std::vector<F> want_fns = {{"<main>", "", "/app/main.rb", 1},
                             {"block in Foo#bar", "", "/app/foo.rb", 10},
                             {"Foo::Bar#baz", "", "/app/foo/bar.rb", 20}};
  for (size_t i = 0; i < fns.size(); i++) {
    SCOPED_TRACE(i);
    EXPECT_EQ(fns[i].num("id"), static_cast<int64_t>(i + 1));
    EXPECT_EQ(d.str(fns[i].num("name")), want_fns[i].name);
    EXPECT_EQ(d.str(fns[i].num("system_name")), want_fns[i].system_name);
    EXPECT_EQ(d.str(fns[i].num("filename")), want_fns[i].filename);
    EXPECT_EQ(fns[i].num("start_line"), want_fns[i].start_line);
  }

  // Locations: ids 1..n, all on mapping 1, one line each.
  const auto& locs = d.p.children("location");
  ASSERT_EQ(locs.size(), 4u);
  std::vector<std::pair<int64_t, int64_t>> want_locs = {{1, 5}, {2, 12}, {3, 22}, {3, 25}};
  for (size_t i = 0; i < locs.size(); i++) {
    SCOPED_TRACE(i);
    EXPECT_EQ(locs[i].num("id"), static_cast<int64_t>(i + 1));
    EXPECT_EQ(locs[i].num("mapping_id"), 1);
    ASSERT_EQ(locs[i].children("line").size(), 1u);
    EXPECT_EQ(locs[i].children("line")[0].num("function_id"), want_locs[i].first);
    EXPECT_EQ(locs[i].children("line")[0].num("line"), want_locs[i].second);
  }

  // Samples, in first-insertion order, the two String ones merged.
  const auto& samples = d.p.children("sample");
  ASSERT_EQ(samples.size(), 4u);
  using Strs = std::vector<std::string>;
  using Vals = std::vector<int64_t>;
  EXPECT_EQ(d.stack(samples[0]), (Strs{"Foo::Bar#baz:22", "block in Foo#bar:12", "<main>:5"}));
  EXPECT_EQ(d.values(samples[0]), (Vals{3, 120}));
  EXPECT_EQ(d.labels(samples[0]), (Strs{"class=String"}));

  EXPECT_EQ(d.stack(samples[1]), (Strs{"Foo::Bar#baz:25", "block in Foo#bar:12", "<main>:5"}));
  EXPECT_EQ(d.values(samples[1]), (Vals{1, 1000}));
  EXPECT_EQ(d.labels(samples[1]), (Strs{"class=Array", "bytes=1000 bytes"}));

  EXPECT_EQ(d.stack(samples[2]), (Strs{"Foo::Bar#baz:22", "block in Foo#bar:12", "<main>:5"}));
  EXPECT_EQ(d.values(samples[2]), (Vals{5, 5}));
  EXPECT_EQ(d.labels(samples[2]), (Strs{"class=Hash"}));

  EXPECT_EQ(d.stack(samples[3]), (Strs{"<main>:5"}));
  EXPECT_EQ(d.values(samples[3]), (Vals{7, 700}));
  EXPECT_EQ(d.labels(samples[3]), (Strs{"depth=-3"}));
  // A label is str xor num: the string one has no num fields and vice versa.
  EXPECT_TRUE(samples[1].children("label")[0].all("num").empty());
  EXPECT_TRUE(samples[1].children("label")[1].all("str").empty());
}

TEST(PprofBuilderProtocTest, MinimalProfileAndEdgeValues) {
  FATHOM_REQUIRE_TOOL("protoc");
  FATHOM_REQUIRE_FILE(FATHOM_PPROF_PROTO_DIR "/profile.proto");
  PprofBuilder b({{"cpu", "nanoseconds"}}, {"cpu", "nanoseconds"}, 10000000, "my-binary");
  // A name long enough for a 3-byte length prefix, and a deep stack for a
  // multi-byte packed length.
  std::string long_name(20000, 'n');
  uint64_t f = b.intern_function(long_name, "", 0);
  std::vector<uint64_t> deep;
  for (int i = 0; i < 300; i++) deep.push_back(b.intern_location(f, i + 1000));
  b.add_sample(deep, {INT64_MAX}, {});
  b.add_sample({deep[0]}, {-42}, {Label::Number("n", INT64_MIN, "")});

  std::optional<TextMessage> msg = DecodeWithProtoc(b.Encode());
  ASSERT_TRUE(msg.has_value());
  Decoded d(std::move(*msg));
  EXPECT_EQ(d.strings[0], "");
  ASSERT_EQ(d.p.children("function").size(), 1u);
  EXPECT_EQ(d.str(d.p.children("function")[0].num("name")), long_name);
  EXPECT_EQ(d.p.children("function")[0].num("system_name"), 0);
  EXPECT_EQ(d.p.children("location").size(), 300u);
  const auto& samples = d.p.children("sample");
  ASSERT_EQ(samples.size(), 2u);
  EXPECT_EQ(d.stack(samples[0]).size(), 300u);
  EXPECT_EQ(d.stack(samples[0]).back(), long_name + ":1299");
  EXPECT_EQ(d.values(samples[0]), std::vector<int64_t>{INT64_MAX});
  EXPECT_EQ(d.values(samples[1]), std::vector<int64_t>{-42});
  EXPECT_EQ(d.labels(samples[1]), std::vector<std::string>{"n=" + std::to_string(INT64_MIN)});
  EXPECT_EQ(d.str(d.p.children("mapping")[0].num("filename")), "my-binary");
  // Unset optional fields are absent.
  EXPECT_TRUE(d.p.all("time_nanos").empty());
  EXPECT_TRUE(d.p.all("comment").empty());
  EXPECT_TRUE(d.p.all("default_sample_type").empty());
}

TEST(PprofBuilderProtocTest, EmptyProfile) {
  FATHOM_REQUIRE_TOOL("protoc");
  FATHOM_REQUIRE_FILE(FATHOM_PPROF_PROTO_DIR "/profile.proto");
  PprofBuilder b({{"samples", "count"}}, {"cpu", "nanoseconds"}, 1);
  std::optional<TextMessage> msg = DecodeWithProtoc(b.Encode());
  ASSERT_TRUE(msg.has_value());
  Decoded d(std::move(*msg));
  EXPECT_TRUE(d.p.children("sample").empty());
  EXPECT_TRUE(d.p.children("location").empty());
  EXPECT_TRUE(d.p.children("function").empty());
  EXPECT_EQ(d.p.children("mapping").size(), 1u);
  EXPECT_EQ(d.p.children("sample_type").size(), 1u);
}

// ---------------------------------------------------------------------------
// go tool pprof as an independent reader of the gzipped file.

class GoPprofTest : public ::testing::Test {
 protected:
  // Runs `go tool pprof ARGS FILE` on the gzipped rich profile.
  test_util::CommandResult Pprof(const std::string& args) {
    std::string file = dir_.file("profile.pb.gz");
    test_util::WriteFile(file, BuildRichProfile().EncodeGzipped());
    // go wants a writable HOME and build cache, which a test sandbox may lack.
    std::string env = "HOME=" + ShellQuote(dir_.path()) + " GOCACHE=" + ShellQuote(dir_.file("gocache")) +
                      " GOPATH=" + ShellQuote(dir_.file("gopath")) + " PPROF_TMPDIR=" + ShellQuote(dir_.path());
    return RunCommand("env " + env + " go tool pprof " + args + " " + ShellQuote(file));
  }

  TempDir dir_;
};

std::string Trim(const std::string& s) {
  size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

std::vector<std::string> Words(const std::string& s) {
  std::istringstream in(s);
  std::vector<std::string> out;
  std::string w;
  while (in >> w) out.push_back(w);
  return out;
}

bool IsInteger(const std::string& s) {
  size_t i = (!s.empty() && s[0] == '-') ? 1 : 0;
  return i < s.size() && s.find_first_not_of("0123456789", i) == std::string::npos;
}

bool AllIntegers(const std::vector<std::string>& words) {
  for (const std::string& w : words)
    if (!IsInteger(w)) return false;
  return true;
}

TEST_F(GoPprofTest, RawShowsSamplesLocationsAndLabels) {
  FATHOM_REQUIRE_TOOL("go");
  test_util::CommandResult r = Pprof("-raw -symbolize=none");
  ASSERT_EQ(r.exit_code, 0) << r.output;

  // Parse -raw's sections: "Samples:" (values: location ids, then indented
  // label lines), "Locations" (id: addr M=n name file:line s=start(sys)).
  std::istringstream in(r.output);
  std::string line, section;
  std::map<std::string, std::string> loc_names;  // raw id -> "name:line"
  struct RawSample {
    std::string values;
    std::vector<std::string> loc_ids;
    std::vector<std::string> labels;
  };
  std::vector<RawSample> samples;
  std::vector<std::string> header;
  std::map<std::string, std::string> loc_system_names;
  while (std::getline(in, line)) {
    if (line == "Samples:" || line == "Locations" || line == "Mappings") {
      section = line;
      continue;
    }
    if (section == "Samples:") {
      // "  3  120: 1 2 3" is a sample; other indented lines are its labels.
      size_t colon = line.find(':');
      std::vector<std::string> vals = Words(line.substr(0, colon));
      std::vector<std::string> ids = colon == std::string::npos ? std::vector<std::string>{} : Words(line.substr(colon + 1));
      if (header.empty()) {
        header.push_back(line);
      } else if (colon != std::string::npos && !vals.empty() && AllIntegers(vals) && AllIntegers(ids)) {
        RawSample s;
        for (const std::string& v : vals) s.values += (s.values.empty() ? "" : " ") + v;
        s.loc_ids = ids;
        samples.push_back(s);
      } else if (!samples.empty() && !Trim(line).empty()) {
        samples.back().labels.push_back(Trim(line));
      }
    } else if (section == "Locations" && !Trim(line).empty()) {
      // "     1: 0x0 M=1 Foo::Bar#baz /app/foo/bar.rb:22 s=20(baz)"
      std::string t = Trim(line);
      size_t colon = t.find(": ");
      ASSERT_NE(colon, std::string::npos) << line;
      std::string id = t.substr(0, colon), rest = t.substr(colon + 2);
      ASSERT_EQ(rest.rfind("0x0 M=1 ", 0), 0u) << line;
      rest = rest.substr(8);
      size_t s_pos = rest.rfind(" s=");
      ASSERT_NE(s_pos, std::string::npos) << line;
      std::string start = rest.substr(s_pos + 3);
      rest = rest.substr(0, s_pos);
      size_t file_pos = rest.rfind(' ');
      ASSERT_NE(file_pos, std::string::npos) << line;
      std::string name = rest.substr(0, file_pos), file_line = rest.substr(file_pos + 1);
      loc_names[id] = name + file_line.substr(file_line.rfind(':'));
      size_t paren = start.find('(');
      loc_system_names[id] = paren == std::string::npos ? name : start.substr(paren + 1, start.size() - paren - 2);
    } else if (section == "Mappings" && !Trim(line).empty()) {
      EXPECT_NE(line.find("ruby"), std::string::npos) << line;
      EXPECT_NE(line.find("[FN]"), std::string::npos) << line;
    }
  }
  ASSERT_EQ(header.size(), 1u) << r.output;
  EXPECT_EQ(Trim(header[0]), "alloc_objects/count alloc_space/bytes[dflt]");
  ASSERT_EQ(loc_names.size(), 4u) << r.output;

  auto names = [&](const RawSample& s) {
    std::vector<std::string> out;
    for (const std::string& id : s.loc_ids) out.push_back(loc_names.count(id) ? loc_names[id] : "?" + id);
    return out;
  };
  using Strs = std::vector<std::string>;
  ASSERT_EQ(samples.size(), 4u) << r.output;
  EXPECT_EQ(samples[0].values, "3 120");
  EXPECT_EQ(names(samples[0]), (Strs{"Foo::Bar#baz:22", "block in Foo#bar:12", "<main>:5"}));
  EXPECT_EQ(samples[0].labels, (Strs{"class:[String]"}));
  EXPECT_EQ(samples[1].values, "1 1000");
  EXPECT_EQ(names(samples[1]), (Strs{"Foo::Bar#baz:25", "block in Foo#bar:12", "<main>:5"}));
  EXPECT_EQ(samples[1].labels, (Strs{"class:[Array]", "bytes:[1000 bytes]"}));
  EXPECT_EQ(samples[2].values, "5 5");
  EXPECT_EQ(samples[2].labels, (Strs{"class:[Hash]"}));
  EXPECT_EQ(samples[3].values, "7 700");
  EXPECT_EQ(names(samples[3]), (Strs{"<main>:5"}));
  EXPECT_EQ(samples[3].labels, (Strs{"depth:[-3]"}));

  // No system names (pprof_builder.h says why): -raw prints "s=N()".
  for (const auto& [id, name] : loc_names) EXPECT_EQ(loc_system_names[id], "") << name;

  EXPECT_NE(r.output.find("PeriodType: space bytes"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("Period: 524288"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("Duration: 2.5s"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("Comment: fathom test"), std::string::npos) << r.output;
}

// Flat totals per function from `-top`'s table:
// "     1125B 61.64% 61.64%      1125B 61.64%  Foo::Bar#baz"
std::map<std::string, std::string> TopFlat(const std::string& output) {
  std::map<std::string, std::string> flat;
  std::istringstream in(output);
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream row(line);
    std::string cols[5];
    for (std::string& c : cols) row >> c;
    if (!row || cols[1].back() != '%' || cols[2].back() != '%' || cols[4].back() != '%') continue;
    std::string name;
    std::getline(row >> std::ws, name);
    flat[name] = cols[0];
  }
  return flat;
}

TEST_F(GoPprofTest, TopShowsFlatTotalsPerSampleType) {
  FATHOM_REQUIRE_TOOL("go");
  test_util::CommandResult r = Pprof("-top -symbolize=none -sample_index=alloc_space");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("Type: alloc_space"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("of 1825B total"), std::string::npos) << r.output;
  std::map<std::string, std::string> flat = TopFlat(r.output);
  EXPECT_EQ(flat["Foo::Bar#baz"], "1125B") << r.output;
  EXPECT_EQ(flat["<main>"], "700B") << r.output;
  EXPECT_EQ(flat["block in Foo#bar"], "0") << r.output;

  r = Pprof("-top -symbolize=none -sample_index=alloc_objects");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("Type: alloc_objects"), std::string::npos) << r.output;
  flat = TopFlat(r.output);
  EXPECT_EQ(flat["Foo::Bar#baz"], "9") << r.output;
  EXPECT_EQ(flat["<main>"], "7") << r.output;
  EXPECT_EQ(flat["block in Foo#bar"], "0") << r.output;

  // Without -sample_index, default_sample_type decides.
  r = Pprof("-top -symbolize=none");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("Type: alloc_space"), std::string::npos) << r.output;
}

// What a user gets from `go tool pprof -top file` with no flags: pprof's
// symbolizer leaves our names alone (empty system_name), where it used to
// turn "<main>" into "[ruby]" and cut "Foo::Bar#baz" to "Bar#baz".
TEST_F(GoPprofTest, DefaultFlagsKeepRubyNames) {
  FATHOM_REQUIRE_TOOL("go");
  test_util::CommandResult r = Pprof("-top");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::map<std::string, std::string> flat = TopFlat(r.output);
  EXPECT_EQ(flat["Foo::Bar#baz"], "1125B") << r.output;
  EXPECT_EQ(flat["<main>"], "700B") << r.output;
  EXPECT_EQ(flat["block in Foo#bar"], "0") << r.output;
  EXPECT_EQ(r.output.find("[ruby]"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace fathom
