// Tests for the JSON writer and the Firefox Profiler processed-format writer.
// The profile tests serialize, parse the text back with an independent
// strict parser (mini_json.h) and check the result with the structural
// validator (firefox_format_check.h), then look at the values themselves.
#include "firefox/firefox_profile.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <stdexcept>
#include <string>
#include <vector>

#include "testing/external_tools.h"
#include "testing/firefox_format_check.h"
#include "firefox/json_writer.h"
#include "testing/mini_json.h"

namespace fathom {
namespace {

namespace json = test_util::json;
using firefox::Category;
using firefox::MarkerDatum;
using firefox::MarkerField;
using firefox::MarkerSchema;
using firefox::Profile;
using firefox::Thread;
using firefox::WeightType;
using test_util::FirefoxFormatChecker;
using test_util::FirefoxFormatErrors;

// ---------------------------------------------------------------------------
// JsonWriter

std::string Quoted(std::string_view s) {
  std::string out;
  JsonWriter::AppendQuoted(&out, s);
  return out;
}

std::string DoubleText(double v) {
  std::string out;
  JsonWriter::AppendDouble(&out, v);
  return out;
}

TEST(FirefoxJsonWriterTest, EscapesQuotesBackslashesAndControlCharacters) {
  EXPECT_EQ(Quoted(""), R"("")");
  EXPECT_EQ(Quoted("plain / text"), R"("plain / text")");
  EXPECT_EQ(Quoted("say \"hi\""), R"("say \"hi\"")");
  EXPECT_EQ(Quoted("C:\\path"), R"("C:\\path")");
  EXPECT_EQ(Quoted("a\nb\tc\rd\be\ff"), R"("a\nb\tc\rd\be\ff")");
  EXPECT_EQ(Quoted(std::string("nul\0x", 5)), R"("nul\u0000x")");
  EXPECT_EQ(Quoted("\x01\x1f\x7f"), "\"\\u0001\\u001f\x7f\"");  // DEL needs no escape
}

TEST(FirefoxJsonWriterTest, PassesWellFormedUtf8Through) {
  // 2-, 3- and 4-byte sequences, including the edges of each range.
  const std::string s = "caf\xC3\xA9 \xE2\x82\xAC \xF0\x9F\x92\x8E \xC2\x80 \xED\x9F\xBF \xEE\x80\x80 \xF4\x8F\xBF\xBF";
  EXPECT_EQ(Quoted(s), "\"" + s + "\"");
}

TEST(FirefoxJsonWriterTest, ReplacesIllFormedUtf8WithOneReplacementPerMaximalSubpart) {
  const std::string R = "\xEF\xBF\xBD";
  EXPECT_EQ(Quoted("a\x80z"), "\"a" + R + "z\"");                 // stray continuation byte
  EXPECT_EQ(Quoted("a\xC3"), "\"a" + R + "\"");                   // truncated at the end
  EXPECT_EQ(Quoted("\xC3(z"), "\"" + R + "(z\"");                 // bad continuation: '(' kept
  EXPECT_EQ(Quoted("\xC0\xAF"), "\"" + R + R + "\"");             // overlong '/': two bad bytes
  EXPECT_EQ(Quoted("\xE0\x80\x80"), "\"" + R + R + R + "\"");     // overlong 3-byte form
  EXPECT_EQ(Quoted("\xED\xA0\x80"), "\"" + R + R + R + "\"");     // UTF-16 surrogate U+D800
  EXPECT_EQ(Quoted("\xF4\x90\x80\x80"), "\"" + R + R + R + R + "\"");  // past U+10FFFF
  EXPECT_EQ(Quoted("\xF5\xFF"), "\"" + R + R + "\"");
  EXPECT_EQ(Quoted("\xE2\x82z"), "\"" + R + "z\"");               // truncated 3-byte: one subpart
  EXPECT_EQ(Quoted("\xF0\x9F\x92"), "\"" + R + "\"");             // truncated 4-byte at the end
  EXPECT_EQ(Quoted("\xE2\x82\xC3\xA9"), "\"" + R + "\xC3\xA9\"");  // valid sequence right after
  // Whatever the bytes, the result parses as strict JSON (valid UTF-8).
  std::string all;
  for (int b = 0; b < 256; b++) all += static_cast<char>(b);
  all += all;
  EXPECT_NO_THROW(json::Parse(Quoted(all)));
}

TEST(FirefoxJsonWriterTest, EscapedStringsRoundTripThroughTheParser) {
  const std::string s = std::string("q\"b\\s/\n\t\x01\x1f", 11) + "caf\xC3\xA9 \xF0\x9F\x92\x8E" + std::string(1, '\0');
  EXPECT_EQ(json::Parse(Quoted(s)).as_string(), s);
}

TEST(FirefoxJsonWriterTest, FormatsNumbers) {
  EXPECT_EQ(DoubleText(0), "0");
  EXPECT_EQ(DoubleText(-0.0), "-0");
  EXPECT_EQ(DoubleText(1), "1");
  EXPECT_EQ(DoubleText(0.1), "0.1");
  EXPECT_EQ(DoubleText(2.5), "2.5");
  EXPECT_EQ(DoubleText(1e21), "1e+21");
  EXPECT_EQ(DoubleText(1.5e-7), "1.5e-07");
  EXPECT_EQ(DoubleText(1700000000123.25), "1700000000123.25");  // a Unix time in ms keeps its fraction
  EXPECT_EQ(DoubleText(std::nan("")), "null");
  EXPECT_EQ(DoubleText(std::numeric_limits<double>::infinity()), "null");
  EXPECT_EQ(DoubleText(-std::numeric_limits<double>::infinity()), "null");
  // Shortest round trip: the parsed value is the same double, bit for bit.
  for (double v : {0.1 + 0.2, 1.0 / 3, 123456.789e-300, std::numeric_limits<double>::max(),
                   std::numeric_limits<double>::denorm_min(), -987654321.123456789}) {
    EXPECT_EQ(json::Parse(DoubleText(v)).as_double(), v) << DoubleText(v);
  }

  std::string out;
  JsonWriter w(&out);
  w.BeginArray();
  w.Int(INT64_MIN);
  w.Int(INT64_MAX);
  w.Uint(UINT64_MAX);
  w.Int(0);
  w.Bool(true);
  w.Bool(false);
  w.Null();
  w.Double(std::nan(""));
  w.EndArray();
  EXPECT_EQ(out, "[-9223372036854775808,9223372036854775807,18446744073709551615,0,true,false,null,null]");
  EXPECT_TRUE(w.complete());
}

TEST(FirefoxJsonWriterTest, WritesNestedStructuresWithCommas) {
  std::string out;
  JsonWriter w(&out);
  w.BeginObject();
  w.KeyInt("a", 1);
  w.Key("b");
  w.BeginArray();
  w.BeginObject();
  w.EndObject();
  w.BeginArray();
  w.EndArray();
  w.String("x");
  w.EndArray();
  w.KeyString("c\"", "d");
  w.Key("e");
  w.BeginObject();
  w.KeyNull("f");
  w.EndObject();
  w.EndObject();
  EXPECT_EQ(out, R"({"a":1,"b":[{},[],"x"],"c\"":"d","e":{"f":null}})");
  EXPECT_TRUE(w.complete());
  EXPECT_NO_THROW(json::Parse(out));
}

TEST(FirefoxJsonWriterTest, RejectsMisuse) {
  std::string out;
  {
    JsonWriter w(&out);
    w.BeginObject();
    EXPECT_THROW(w.Int(1), std::logic_error);  // value without a key
    EXPECT_THROW(w.EndArray(), std::logic_error);
    w.Key("k");
    EXPECT_THROW(w.Key("k2"), std::logic_error);  // two keys
    EXPECT_THROW(w.EndObject(), std::logic_error);  // key without value
  }
  {
    JsonWriter w(&out);
    w.BeginArray();
    EXPECT_THROW(w.Key("k"), std::logic_error);  // key in an array
    w.EndArray();
    EXPECT_THROW(w.Int(2), std::logic_error);  // second top-level value
  }
}

TEST(FirefoxJsonWriterTest, IsDeterministic) {
  auto write = [] {
    std::string out;
    JsonWriter w(&out);
    w.BeginObject();
    w.KeyDouble("pi", 3.141592653589793);
    w.KeyString("s", "\xFF\xC3\xA9\n");
    w.EndObject();
    return out;
  };
  EXPECT_EQ(write(), write());
  EXPECT_EQ(write(), "{\"pi\":3.141592653589793,\"s\":\"\xEF\xBF\xBD\xC3\xA9\\n\"}");
}

// ---------------------------------------------------------------------------
// The profile used by the round-trip tests: a GC track like the GC profiler's
// (interval markers + tracing-ms samples on one frame) and a Ruby thread
// with a 3-deep stack.

constexpr double kStartUnixMs = 1700000000123.5;

struct Built {
  Profile profile{"Fathom test", kStartUnixMs, 1.0};
  uint32_t ruby = 0, gc = 0;
};

void BuildTestProfile(Built& b) {
  Profile& p = b.profile;
  b.ruby = p.AddCategory(Category{"Ruby", "yellow", {"Other", "gems"}});
  b.gc = p.AddCategory(Category{"GC", "orange", {}});
  MarkerSchema gc_schema;
  gc_schema.name = "GC";
  gc_schema.tooltip_label = "{marker.name} - {marker.data.gc_type}";
  gc_schema.table_label = "{marker.data.gc_type} GC ({marker.data.reason})";
  gc_schema.chart_label = "{marker.data.gc_type}";
  gc_schema.display = {"marker-chart", "marker-table", "timeline-overview"};
  gc_schema.fields = {{"gc_type", "Type", "string", true},
                      {"reason", "Reason", "string", true},
                      {"gc_cause", "Cause", "string", false},
                      {"heap_before", "Heap slots before", "integer", false},
                      {"heap_after", "Heap slots after", "integer", false},
                      {"duration", "Duration", "duration", false}};
  gc_schema.description = "Ruby's garbage collector ran";
  p.AddMarkerSchema(gc_schema);
  p.SetProfilingRange(0, 100);

  Thread& gc = p.AddThread("Garbage Collection", 4242, 4242001, false, "ruby script.rb");
  gc.SetWeightType(WeightType::kTracingMs);
  uint32_t gc_func = gc.InternFunc("Garbage Collection", "", 0, false);
  uint32_t gc_stack = gc.InternStack(std::nullopt, gc.InternFrame(gc_func, 0, b.gc));
  gc.AddIntervalMarker("GC", 10, 12.5, b.gc, "GC",
                       {MarkerDatum::String("gc_type", "minor"), MarkerDatum::String("reason", "newobj"),
                        MarkerDatum::String("gc_cause", "caller \"quoted\"\n"), MarkerDatum::Number("heap_before", 40000),
                        MarkerDatum::Number("heap_after", 31000), MarkerDatum::Number("duration", 2.5)});
  gc.AddSample(10, gc_stack, 2.5);
  gc.AddIntervalMarker("GC", 30, 30.75, b.gc, "GC",
                       {MarkerDatum::String("gc_type", "major"), MarkerDatum::String("reason", "malloc"),
                        MarkerDatum::Number("duration", 0.75)});
  gc.AddSample(30, gc_stack, 0.75);
  gc.AddInstantMarker("compact", 31, b.gc);

  Thread& main = p.AddThread("main", 4242, 4242, true, "ruby script.rb");
  uint32_t f_main = main.InternFunc("<main>", "/app/script.rb", 1);
  uint32_t f_bar = main.InternFunc("Foo#bar", "/gems/foo/lib/foo.rb", 10);
  uint32_t f_times = main.InternFunc("Integer#times", "", 0, false, true);
  uint32_t s1 = main.InternStack(std::nullopt, main.InternFrame(f_main, 3, b.ruby));
  uint32_t s2 = main.InternStack(s1, main.InternFrame(f_bar, 12, b.ruby, 1));
  uint32_t s3 = main.InternStack(s2, main.InternFrame(f_times, 0, b.ruby));
  // Out of order on purpose: written sorted by time.
  main.AddSample(3, s3);
  main.AddSample(1, s1);
  main.AddSample(2, s2);
  main.AddSample(4, std::nullopt);
  p.SetSelectedThread(1);
}

// Follows a sample's stack to the root: the func names, leaf first.
std::vector<std::string> StackFuncNames(const json::Value& thread, const json::Value& stack) {
  std::vector<std::string> names;
  const json::Value& strings = thread["stringArray"];
  for (const json::Value* s = &stack; !s->is_null();) {
    size_t i = static_cast<size_t>(s->as_int());
    size_t frame = static_cast<size_t>(thread["stackTable"]["frame"][i].as_int());
    size_t func = static_cast<size_t>(thread["frameTable"]["func"][frame].as_int());
    names.push_back(strings[static_cast<size_t>(thread["funcTable"]["name"][func].as_int())].as_string());
    s = &thread["stackTable"]["prefix"][i];
  }
  return names;
}

std::string Str(const json::Value& thread, const json::Value& index) {
  return thread["stringArray"][static_cast<size_t>(index.as_int())].as_string();
}

TEST(FirefoxProfileTest, RoundTripPassesTheValidatorAndKeepsTheValues) {
  Built b;
  BuildTestProfile(b);
  const std::string text = b.profile.ToJson();
  const json::Value doc = json::Parse(text);
  ASSERT_EQ(FirefoxFormatErrors(doc), "");

  // meta
  const json::Value& meta = doc["meta"];
  EXPECT_EQ(meta["preprocessedProfileVersion"].as_int(), 48);
  EXPECT_EQ(meta["version"].as_int(), 29);
  EXPECT_EQ(meta["interval"].as_double(), 1.0);
  EXPECT_EQ(meta["startTime"].as_double(), kStartUnixMs);
  EXPECT_EQ(meta["endTime"].as_double(), kStartUnixMs + 100);
  EXPECT_EQ(meta["profilingStartTime"].as_double(), 0);
  EXPECT_EQ(meta["profilingEndTime"].as_double(), 100);
  EXPECT_EQ(meta["product"].as_string(), "Fathom test");
  EXPECT_TRUE(meta["symbolicated"].as_bool());
  const json::Value& cats = meta["categories"];
  ASSERT_EQ(cats.size(), 3u);  // + the grey default category, since neither is grey
  EXPECT_EQ(cats[0]["name"].as_string(), "Ruby");
  EXPECT_EQ(cats[0]["color"].as_string(), "yellow");
  EXPECT_EQ(cats[0]["subcategories"][1].as_string(), "gems");
  EXPECT_EQ(cats[1]["name"].as_string(), "GC");
  EXPECT_EQ(cats[1]["subcategories"].size(), 1u);
  EXPECT_EQ(cats[1]["subcategories"][0].as_string(), "Other");
  EXPECT_EQ(cats[2]["name"].as_string(), "Other");
  EXPECT_EQ(cats[2]["color"].as_string(), "grey");
  const json::Value& schema = meta["markerSchema"][0];
  EXPECT_EQ(schema["name"].as_string(), "GC");
  EXPECT_EQ(schema["tooltipLabel"].as_string(), "{marker.name} - {marker.data.gc_type}");
  EXPECT_EQ(schema["display"][2].as_string(), "timeline-overview");
  EXPECT_EQ(schema["data"][0]["label"].as_string(), "Description");
  EXPECT_EQ(schema["data"][0]["value"].as_string(), "Ruby's garbage collector ran");
  EXPECT_EQ(schema["data"][1]["key"].as_string(), "gc_type");
  EXPECT_TRUE(schema["data"][1]["searchable"].as_bool());
  EXPECT_EQ(schema["data"][6]["format"].as_string(), "duration");
  EXPECT_EQ(meta["initialVisibleThreads"].size(), 2u);
  EXPECT_EQ(meta["initialSelectedThreads"][0].as_int(), 1);
  ASSERT_EQ(doc["threads"].size(), 2u);

  // The GC thread.
  const json::Value& gc = doc["threads"][0];
  EXPECT_EQ(gc["name"].as_string(), "Garbage Collection");
  EXPECT_EQ(gc["pid"].as_string(), "4242");
  EXPECT_EQ(gc["tid"].as_int(), 4242001);
  EXPECT_FALSE(gc["isMainThread"].as_bool());
  EXPECT_EQ(gc["processName"].as_string(), "ruby script.rb");
  const json::Value& gs = gc["samples"];
  EXPECT_EQ(gs["weightType"].as_string(), "tracing-ms");
  ASSERT_EQ(gs["length"].as_int(), 2);
  EXPECT_EQ(gs["time"][0].as_double(), 10);
  EXPECT_EQ(gs["time"][1].as_double(), 30);
  EXPECT_EQ(gs["weight"][0].as_double(), 2.5);
  EXPECT_EQ(gs["weight"][1].as_double(), 0.75);
  EXPECT_EQ(StackFuncNames(gc, gs["stack"][0]), std::vector<std::string>{"Garbage Collection"});
  EXPECT_EQ(gc["funcTable"]["fileName"][0].type(), json::Value::Type::kNull);
  EXPECT_FALSE(gc["funcTable"]["isJS"][0].as_bool());
  EXPECT_EQ(gc["frameTable"]["category"][0].as_int(), b.gc);
  const json::Value& gm = gc["markers"];
  ASSERT_EQ(gm["length"].as_int(), 3);
  EXPECT_EQ(Str(gc, gm["name"][0]), "GC");
  EXPECT_EQ(Str(gc, gm["name"][1]), "GC");
  EXPECT_EQ(Str(gc, gm["name"][2]), "compact");
  EXPECT_EQ(gm["startTime"][0].as_double(), 10);
  EXPECT_EQ(gm["endTime"][0].as_double(), 12.5);
  EXPECT_EQ(gm["phase"][0].as_int(), 1);
  EXPECT_EQ(gm["category"][0].as_int(), b.gc);
  EXPECT_EQ(gm["startTime"][2].as_double(), 31);
  EXPECT_TRUE(gm["endTime"][2].is_null());
  EXPECT_EQ(gm["phase"][2].as_int(), 0);
  EXPECT_TRUE(gm["data"][2].is_null());
  const json::Value& d0 = gm["data"][0];
  EXPECT_EQ(d0["type"].as_string(), "GC");
  EXPECT_EQ(d0["gc_type"].as_string(), "minor");
  EXPECT_EQ(d0["reason"].as_string(), "newobj");
  EXPECT_EQ(d0["gc_cause"].as_string(), "caller \"quoted\"\n");
  EXPECT_EQ(d0["heap_before"].as_int(), 40000);
  EXPECT_EQ(d0["heap_after"].as_int(), 31000);
  EXPECT_EQ(d0["duration"].as_double(), 2.5);
  EXPECT_EQ(gm["data"][1]["gc_type"].as_string(), "major");
  EXPECT_EQ(gm["data"][1].find("heap_before"), nullptr);

  // The Ruby thread.
  const json::Value& main = doc["threads"][1];
  EXPECT_TRUE(main["isMainThread"].as_bool());
  const json::Value& ms = main["samples"];
  EXPECT_EQ(ms["weightType"].as_string(), "samples");
  EXPECT_TRUE(ms["weight"].is_null());  // all ones
  ASSERT_EQ(ms["length"].as_int(), 4);
  for (size_t i = 0; i < 4; i++) EXPECT_EQ(ms["time"][i].as_double(), static_cast<double>(i + 1));
  EXPECT_EQ(StackFuncNames(main, ms["stack"][0]), std::vector<std::string>{"<main>"});
  EXPECT_EQ(StackFuncNames(main, ms["stack"][2]), (std::vector<std::string>{"Integer#times", "Foo#bar", "<main>"}));
  EXPECT_TRUE(ms["stack"][3].is_null());
  EXPECT_EQ(main["stackTable"]["length"].as_int(), 3);
  EXPECT_TRUE(main["stackTable"]["prefix"][0].is_null());
  EXPECT_EQ(main["stackTable"]["subcategory"][1].as_int(), 1);  // Foo#bar's frame is in "gems"
  const json::Value& funcs = main["funcTable"];
  EXPECT_EQ(Str(main, funcs["name"][1]), "Foo#bar");
  EXPECT_EQ(Str(main, funcs["fileName"][1]), "/gems/foo/lib/foo.rb");
  EXPECT_EQ(funcs["lineNumber"][1].as_int(), 10);
  EXPECT_TRUE(funcs["isJS"][1].as_bool());
  EXPECT_FALSE(funcs["isJS"][2].as_bool());
  EXPECT_TRUE(funcs["relevantForJS"][2].as_bool());
  EXPECT_TRUE(funcs["fileName"][2].is_null());
  EXPECT_TRUE(funcs["lineNumber"][2].is_null());
  EXPECT_EQ(main["frameTable"]["line"][1].as_int(), 12);
  EXPECT_TRUE(main["frameTable"]["line"][2].is_null());
  EXPECT_EQ(main["markers"]["length"].as_int(), 0);

  // Optional: keep the file for looking at it by hand / other tools.
  if (const char* keep = std::getenv("FATHOM_FIREFOX_PROFILE_OUT")) test_util::WriteFile(keep, text);
}

TEST(FirefoxProfileTest, InterningStoresEachDistinctEntryOnce) {
  Profile p("t", 0, 1);
  uint32_t cat = p.AddCategory(Category{"Ruby", "yellow", {}});
  Thread& t = p.AddThread("main", 1, 1, true);
  uint32_t f1 = t.InternFunc("a", "x.rb", 1);
  EXPECT_EQ(t.InternFunc("a", "x.rb", 1), f1);
  EXPECT_NE(t.InternFunc("a", "y.rb", 1), f1);
  EXPECT_NE(t.InternFunc("a", "x.rb", 1, false), f1);
  EXPECT_EQ(t.func_count(), 3u);
  uint32_t fr = t.InternFrame(f1, 5, cat);
  EXPECT_EQ(t.InternFrame(f1, 5, cat), fr);
  EXPECT_NE(t.InternFrame(f1, 6, cat), fr);
  uint32_t s = t.InternStack(std::nullopt, fr);
  EXPECT_EQ(t.InternStack(std::nullopt, fr), s);
  uint32_t s2 = t.InternStack(s, fr);  // recursion: same frame twice
  EXPECT_NE(s2, s);
  EXPECT_EQ(t.InternStack(s, fr), s2);
  EXPECT_EQ(t.stack_count(), 2u);
  // "a", "x.rb", "y.rb": each string once.
  EXPECT_EQ(t.string_count(), 3u);
}

TEST(FirefoxProfileTest, OutputIsDeterministic) {
  Built a, b;
  BuildTestProfile(a);
  BuildTestProfile(b);
  const std::string text = a.profile.ToJson();
  EXPECT_EQ(text, b.profile.ToJson());
  EXPECT_EQ(text, a.profile.ToJson());  // ToJson has no side effects
}

TEST(FirefoxProfileTest, ProfilesAndThreadsSurviveMoves) {
  Built b;
  BuildTestProfile(b);
  Thread& gc = b.profile.thread(0);
  Profile moved = std::move(b.profile);
  gc.AddSample(50, std::nullopt, 0);  // the reference is still good, and still checks categories
  EXPECT_THROW(gc.InternFrame(0, 0, 99), std::invalid_argument);
  EXPECT_EQ(FirefoxFormatErrors(json::Parse(moved.ToJson())), "");
}

TEST(FirefoxProfileTest, KeepsAnExistingGreyCategoryAndWritesUnitWeightsForOtherTypes) {
  Profile p("t", 0, 0.5);
  p.AddCategory(Category{"Other", "grey", {}});
  p.AddCategory(Category{"Idle", "transparent", {}});
  Thread& t = p.AddThread("allocations", 1, 2, false);
  t.SetWeightType(WeightType::kBytes);
  uint32_t s = t.InternStack(std::nullopt, t.InternFrame(t.InternFunc("f", "f.rb", 1), 1, 0));
  t.AddSample(0, s, 1);
  t.SetLifetime(0, 5);
  json::Value doc = json::Parse(p.ToJson());
  ASSERT_EQ(FirefoxFormatErrors(doc), "");
  EXPECT_EQ(doc["meta"]["categories"].size(), 2u);
  EXPECT_EQ(doc["threads"][0]["samples"]["weight"][0].as_double(), 1);  // bytes: kept even when 1
  EXPECT_EQ(doc["threads"][0]["unregisterTime"].as_double(), 5);
  EXPECT_EQ(doc["meta"].find("initialSelectedThreads"), nullptr);
  EXPECT_EQ(doc["meta"].find("profilingStartTime"), nullptr);
}

TEST(FirefoxProfileTest, RejectsBadInputWithoutChangingAnything) {
  Profile p("t", 0, 1);
  EXPECT_THROW(Profile("t", 0, 0), std::invalid_argument);
  EXPECT_THROW(Profile("t", std::nan(""), 1), std::invalid_argument);
  EXPECT_THROW(p.AddCategory(Category{"X", "chartreuse", {}}), std::invalid_argument);
  EXPECT_THROW(p.AddCategory(Category{"X", "red", {"Sub"}}), std::invalid_argument);
  EXPECT_THROW(p.AddCategory(Category{"", "red", {}}), std::invalid_argument);
  uint32_t cat = p.AddCategory(Category{"Ruby", "red", {}});
  EXPECT_THROW(p.AddMarkerSchema(MarkerSchema{"S", "", "", "", {"sidebar"}, {}, ""}), std::invalid_argument);
  EXPECT_THROW(p.AddMarkerSchema(MarkerSchema{"S", "", "", "", {}, {{"type", "", "string"}}, ""}),
               std::invalid_argument);
  EXPECT_THROW(p.AddMarkerSchema(MarkerSchema{"S", "", "", "", {}, {{"cause", "Cause", "string"}}, ""}),
               std::invalid_argument);
  EXPECT_THROW(p.AddMarkerSchema(MarkerSchema{"S", "", "", "", {}, {{"k", "", "unique-string"}}, ""}),
               std::invalid_argument);
  EXPECT_THROW(p.AddMarkerSchema(MarkerSchema{"S", "", "", "", {}, {{"k", "", "string"}, {"k", "", "string"}}, ""}),
               std::invalid_argument);
  p.AddMarkerSchema(MarkerSchema{"S", "", "", "", {"marker-table"}, {{"k", "", "integer"}}, ""});
  EXPECT_THROW(p.AddMarkerSchema(MarkerSchema{"S", "", "", "", {}, {}, ""}), std::invalid_argument);
  EXPECT_THROW(p.ToJson(), std::logic_error);  // no thread yet
  EXPECT_THROW(p.SetSelectedThread(0), std::invalid_argument);

  Thread& t = p.AddThread("main", 1, 1, true);
  EXPECT_THROW(t.InternFrame(0, 1, cat), std::invalid_argument);  // no such func
  uint32_t f = t.InternFunc("f", "", 0);
  EXPECT_THROW(t.InternFrame(f, 1, 7), std::invalid_argument);     // no such category
  EXPECT_THROW(t.InternFrame(f, 1, cat, 1), std::invalid_argument);  // no such subcategory
  EXPECT_THROW(t.InternStack(std::nullopt, 0), std::invalid_argument);
  uint32_t fr = t.InternFrame(f, 1, cat);
  EXPECT_THROW(t.InternStack(5, fr), std::invalid_argument);
  EXPECT_THROW(t.AddSample(0, 0), std::invalid_argument);
  EXPECT_THROW(t.AddSample(std::nan(""), std::nullopt), std::invalid_argument);
  EXPECT_THROW(t.AddSample(0, std::nullopt, std::numeric_limits<double>::infinity()), std::invalid_argument);
  EXPECT_THROW(t.AddIntervalMarker("m", 2, 1, cat), std::invalid_argument);
  EXPECT_THROW(t.AddIntervalMarker("m", 1, 2, cat, "Nope"), std::invalid_argument);
  EXPECT_THROW(t.AddIntervalMarker("m", 1, 2, cat, "", {MarkerDatum::Number("k", 1)}), std::invalid_argument);
  EXPECT_THROW(t.AddIntervalMarker("m", 1, 2, cat, "S", {MarkerDatum::Number("type", 1)}), std::invalid_argument);
  // "cause" means a backtrace to the profiler; a string there breaks the load.
  EXPECT_THROW(t.AddIntervalMarker("m", 1, 2, cat, "S", {MarkerDatum::String("cause", "newobj")}),
               std::invalid_argument);
  EXPECT_THROW(t.AddIntervalMarker("m", 1, 2, cat, "S", {MarkerDatum::Number("innerWindowID", 1)}),
               std::invalid_argument);
  EXPECT_THROW(t.AddIntervalMarker("m", 1, 2, cat, "S", {MarkerDatum::Number("k", 1), MarkerDatum::Number("k", 2)}),
               std::invalid_argument);
  EXPECT_THROW(t.AddInstantMarker("m", 1, cat, "S", {MarkerDatum::Number("k", std::nan(""))}), std::invalid_argument);
  EXPECT_THROW(t.AddInstantMarker("m", 1, 3), std::invalid_argument);
  EXPECT_THROW(t.SetLifetime(5, 4), std::invalid_argument);
  EXPECT_EQ(t.sample_count(), 0u);
  EXPECT_EQ(t.marker_count(), 0u);
  EXPECT_EQ(t.string_count(), 1u);  // only "f": rejected markers interned nothing
  EXPECT_EQ(FirefoxFormatErrors(json::Parse(p.ToJson())), "");
}

// ---------------------------------------------------------------------------
// The validator rejects what the profiler would choke on, naming the field.

json::Value ValidDoc() {
  Built b;
  BuildTestProfile(b);
  return json::Parse(b.profile.ToJson());
}

// Mutates a fresh valid document and returns the validator's message.
template <typename F>
std::string ErrorsAfter(F&& mutate) {
  json::Value doc = ValidDoc();
  mutate(doc);
  return FirefoxFormatErrors(doc);
}

TEST(FirefoxFormatCheckTest, RejectsMissingRequiredFields) {
  EXPECT_NE(ErrorsAfter([](json::Value& d) { d.erase("meta"); }).find("meta: missing"), std::string::npos);
  EXPECT_NE(ErrorsAfter([](json::Value& d) { d.mut("meta").erase("preprocessedProfileVersion"); })
                .find("meta.preprocessedProfileVersion: missing"),
            std::string::npos);
  EXPECT_NE(ErrorsAfter([](json::Value& d) { d.mut("meta").erase("markerSchema"); }).find("meta.markerSchema: missing"),
            std::string::npos);
  EXPECT_NE(ErrorsAfter([](json::Value& d) { d.mut("threads").mut(1).mut("stackTable").erase("prefix"); })
                .find("threads[1].stackTable.prefix: missing"),
            std::string::npos);
  EXPECT_NE(ErrorsAfter([](json::Value& d) { d.mut("threads").mut(0).erase("stringArray"); })
                .find("threads[0].stringArray: missing"),
            std::string::npos);
  EXPECT_NE(ErrorsAfter([](json::Value& d) { d.mut("threads").mut(0).mut("samples").erase("weightType"); })
                .find("threads[0].samples.weightType: missing"),
            std::string::npos);
}

TEST(FirefoxFormatCheckTest, RejectsOutOfRangeIndicesAndBadLengths) {
  // A stack whose prefix is not an earlier stack.
  std::string e = ErrorsAfter([](json::Value& d) {
    d.mut("threads").mut(1).mut("stackTable").mut("prefix").mut(1) = json::Value::Number(2, true, 2);
  });
  EXPECT_NE(e.find("threads[1].stackTable.prefix[1]: 2 is not < 1"), std::string::npos) << e;
  // A frame pointing past the funcTable.
  e = ErrorsAfter([](json::Value& d) {
    d.mut("threads").mut(1).mut("frameTable").mut("func").mut(0) = json::Value::Number(9, true, 9);
  });
  EXPECT_NE(e.find("threads[1].frameTable.func[0]: 9 is out of range for funcTable"), std::string::npos) << e;
  // A func name past the stringArray.
  e = ErrorsAfter([](json::Value& d) {
    d.mut("threads").mut(1).mut("funcTable").mut("name").mut(0) = json::Value::Number(99, true, 99);
  });
  EXPECT_NE(e.find("threads[1].funcTable.name[0]: 99 is out of range for stringArray"), std::string::npos) << e;
  // A marker category past meta.categories.
  e = ErrorsAfter([](json::Value& d) {
    d.mut("threads").mut(0).mut("markers").mut("category").mut(0) = json::Value::Number(3, true, 3);
  });
  EXPECT_NE(e.find("threads[0].markers.category[0]: 3 is out of range for meta.categories"), std::string::npos) << e;
  // length disagreeing with a column.
  e = ErrorsAfter([](json::Value& d) {
    d.mut("threads").mut(0).mut("samples").mut("length") = json::Value::Number(5, true, 5);
  });
  EXPECT_NE(e.find("threads[0].samples.stack: has 2 entries but length is 5"), std::string::npos) << e;
  // A subcategory the category does not have.
  e = ErrorsAfter([](json::Value& d) {
    d.mut("threads").mut(0).mut("frameTable").mut("subcategory").mut(0) = json::Value::Number(1, true, 1);
  });
  EXPECT_NE(e.find("threads[0].frameTable.subcategory[0]"), std::string::npos) << e;
}

TEST(FirefoxFormatCheckTest, RejectsBadValues) {
  std::string e = ErrorsAfter([](json::Value& d) {
    d.mut("meta").mut("preprocessedProfileVersion") = json::Value::Number(70, true, 70);
  });
  EXPECT_NE(e.find("meta.preprocessedProfileVersion: is 70"), std::string::npos) << e;
  e = ErrorsAfter([](json::Value& d) { d.mut("threads").mut(0).mut("pid") = json::Value::Number(1, true, 1); });
  EXPECT_NE(e.find("threads[0].pid: must be a string"), std::string::npos) << e;
  e = ErrorsAfter([](json::Value& d) {
    d.mut("threads").mut(1).mut("samples").mut("time").mut(2) = json::Value::Number(0.5, false, 0);
  });
  EXPECT_NE(e.find("threads[1].samples.time[2]: goes back in time"), std::string::npos) << e;
  e = ErrorsAfter([](json::Value& d) {
    d.mut("threads").mut(0).mut("markers").mut("data").mut(0).mut("heap_before") = json::Value::String("many");
  });
  EXPECT_NE(e.find("threads[0].markers.data[0].heap_before: must be a number"), std::string::npos) << e;
  e = ErrorsAfter([](json::Value& d) {
    d.mut("threads").mut(0).mut("markers").mut("data").mut(0).mut("type") = json::Value::String("Nope");
  });
  EXPECT_NE(e.find("threads[0].markers.data[0]: type \"Nope\" has no schema"), std::string::npos) << e;
  e = ErrorsAfter([](json::Value& d) {
    d.mut("threads").mut(0).mut("markers").mut("data").mut(0).erase("gc_cause");
    // As the GC brief first had it: a string cause, which the profiler's
    // v60 upgrader crashes on (it rewrites data.cause.stack).
    json::Value::Object data = d["threads"][0]["markers"]["data"][0].as_object();
    data.emplace_back("cause", json::Value::String("newobj"));
    d.mut("threads").mut(0).mut("markers").mut("data").mut(0) = json::Value::MakeObject(data);
  });
  EXPECT_NE(e.find("threads[0].markers.data[0].cause: must be an object"), std::string::npos) << e;
  e = ErrorsAfter([](json::Value& d) {
    d.mut("threads").mut(0).mut("markers").mut("endTime").mut(0) = json::Value();
  });
  EXPECT_NE(e.find("threads[0].markers.phase[0]: phase 1 needs an endTime"), std::string::npos) << e;
  e = ErrorsAfter([](json::Value& d) {
    d.mut("meta").mut("categories").mut(2).mut("color") = json::Value::String("green");
  });
  EXPECT_NE(e.find("meta.categories: has no grey category"), std::string::npos) << e;
  e = ErrorsAfter([](json::Value& d) {
    d.mut("meta").mut("markerSchema").mut(0).mut("display").mut(0) = json::Value::String("timeline-network");
  });
  EXPECT_NE(e.find("meta.markerSchema[0].display[0]"), std::string::npos) << e;
  e = ErrorsAfter([](json::Value& d) { d.mut("threads") = json::Value::MakeArray({}); });
  EXPECT_NE(e.find("threads: must not be empty"), std::string::npos) << e;
}

TEST(FirefoxFormatCheckTest, ParserIsStrict) {
  for (const char* bad : {"", "{", "[1,]", "{\"a\":1,}", "01", "1.", ".5", "NaN", "\"\x01\"", "\"\\x\"",
                          "\"\\ud800\"", "{\"a\":1,\"a\":2}", "[1] 2", "\"\xC0\xAF\"", "\"\xED\xA0\x80\""}) {
    EXPECT_THROW(json::Parse(bad), json::ParseError) << bad;
  }
  EXPECT_EQ(json::Parse(" [1, -2.5e3, true, null, \"\\u00e9\\ud83d\\udc8e\"] ")[4].as_string(),
            "\xC3\xA9\xF0\x9F\x92\x8E");
  EXPECT_TRUE(json::Parse("-0").is_int());
  EXPECT_FALSE(json::Parse("1e2").is_int());
}

// ---------------------------------------------------------------------------
// The Ruby twin of the validator (test/support/firefox_format.rb) agrees.

// Writes a parsed document back as JSON text (with JsonWriter).
void WriteValue(JsonWriter& w, const json::Value& v) {
  switch (v.type()) {
    case json::Value::Type::kNull: w.Null(); break;
    case json::Value::Type::kBool: w.Bool(v.as_bool()); break;
    case json::Value::Type::kNumber:
      if (v.is_int())
        w.Int(v.as_int());
      else
        w.Double(v.as_double());
      break;
    case json::Value::Type::kString: w.String(v.as_string()); break;
    case json::Value::Type::kArray:
      w.BeginArray();
      for (const json::Value& e : v.as_array()) WriteValue(w, e);
      w.EndArray();
      break;
    case json::Value::Type::kObject:
      w.BeginObject();
      for (const auto& [k, e] : v.as_object()) {
        w.Key(k);
        WriteValue(w, e);
      }
      w.EndObject();
      break;
  }
}

std::string ToText(const json::Value& v) {
  std::string out;
  JsonWriter w(&out);
  WriteValue(w, v);
  return out;
}

// The Ruby tests' FirefoxFormat.check! runs this checker as a command
// (test/support/firefox_format_tool/): it accepts and rejects what the
// checker does, naming the same fields.
TEST(FirefoxFormatCheckTest, RubyTestsCheckWithThisChecker) {
  FATHOM_REQUIRE_TOOL("ruby");
  // This file is ext/fathom/core/encode/<name>.cc: five parents up is the repository root.
  const std::filesystem::path root = std::filesystem::path(__FILE__).parent_path().parent_path().parent_path()
                                         .parent_path().parent_path();
  const std::filesystem::path checker = root / "test" / "support" / "firefox_format.rb";
  FATHOM_REQUIRE_FILE(checker.string());
  test_util::TempDir dir;
  auto ruby_check = [&](const std::string& text) {
    std::string path = dir.file("profile.json");
    test_util::WriteFile(path, text);
    return test_util::RunCommand(
        "ruby -e 'require \"json\"; require ARGV[0]; FirefoxFormat.check!(JSON.parse(File.read(ARGV[1]))); "
        "puts \"ok\"' " +
        test_util::ShellQuote(checker.string()) + " " + test_util::ShellQuote(path));
  };

  Built b;
  BuildTestProfile(b);
  auto ok = ruby_check(b.profile.ToJson());
  EXPECT_EQ(ok.exit_code, 0) << ok.output;
  EXPECT_EQ(ok.output, "ok\n");

  struct Case {
    const char* expect;  // in the Ruby message
    void (*mutate)(json::Value&);
  };
  const Case cases[] = {
      {"meta.preprocessedProfileVersion", [](json::Value& d) { d.mut("meta").erase("preprocessedProfileVersion"); }},
      {"threads[1].stackTable.prefix[1]",
       [](json::Value& d) {
         d.mut("threads").mut(1).mut("stackTable").mut("prefix").mut(1) = json::Value::Number(2, true, 2);
       }},
      {"threads[1].frameTable.func[0]",
       [](json::Value& d) {
         d.mut("threads").mut(1).mut("frameTable").mut("func").mut(0) = json::Value::Number(9, true, 9);
       }},
      {"threads[0].samples.stack",
       [](json::Value& d) {
         d.mut("threads").mut(0).mut("samples").mut("length") = json::Value::Number(5, true, 5);
       }},
      {"threads[0].markers.data[0].heap_before",
       [](json::Value& d) {
         d.mut("threads").mut(0).mut("markers").mut("data").mut(0).mut("heap_before") = json::Value::String("x");
       }},
      {"threads[0].markers.data[1].cause",
       [](json::Value& d) {
         json::Value::Object data = d["threads"][0]["markers"]["data"][1].as_object();
         data.emplace_back("cause", json::Value::String("newobj"));
         d.mut("threads").mut(0).mut("markers").mut("data").mut(1) = json::Value::MakeObject(data);
       }},
      {"meta.categories", [](json::Value& d) {
         d.mut("meta").mut("categories").mut(2).mut("color") = json::Value::String("green");
       }},
  };
  for (const Case& c : cases) {
    json::Value doc = ValidDoc();
    c.mutate(doc);
    ASSERT_NE(FirefoxFormatErrors(doc).find(c.expect), std::string::npos) << c.expect;  // C++ rejects it...
    auto r = ruby_check(ToText(doc));
    EXPECT_NE(r.exit_code, 0) << c.expect;  // ...and so does Ruby,
    EXPECT_NE(r.output.find("FirefoxFormat::Invalid"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find(c.expect), std::string::npos) << r.output;  // naming the same field
  }
}

}  // namespace
}  // namespace fathom
