#include "dump/dump_reader.h"

#include <gtest/gtest.h>

#include <string>

#include "dump/dump_analysis.h"
#include "dump/dump_graph.h"
#include "retention/dominators.h"

namespace fathom {
namespace {

// A small dump in dump_all's format: a module holding a hash holding an
// object holding a string, plus a class record naming the object's class.
const char kDump[] =
    R"({"type":"ROOT", "root":"vm", "references":["0x1000"]})" "\n"
    R"({"type":"ROOT", "root":"global_tbl", "references":["0x1008"]})" "\n"
    R"({"address":"0x1000", "type":"MODULE", "class":"0x2000", "name":"Registry", "references":["0x1010"], "memsize":400})" "\n"
    R"({"address":"0x1008", "type":"CLASS", "class":"0x2008", "name":"Session", "references":[], "memsize":600})" "\n"
    R"({"address":"0x1010", "type":"HASH", "class":"0x3000", "size":1, "references":["0x1018", "0x1020"], "file":"a.rb", "line":3, "generation":7, "memsize":160})" "\n"
    R"({"address":"0x1018", "type":"STRING", "class":"0x3008", "bytesize":5, "value":"key-1", "memsize":40})" "\n"
    R"({"address":"0x1020", "type":"OBJECT", "class":"0x1008", "ivars":3, "references":["0x1028", "0xdead0"], "file":"a.rb", "line":9, "generation":8, "memsize":40})" "\n"
    R"({"address":"0x1028", "type":"STRING", "class":"0x3008", "bytesize":5000, "value":"pppppppppppppppppppppppp", "memsize":5041})" "\n"
    R"({"address":"0x3000", "type":"CLASS", "class":"0x2010", "name":"Hash", "references":[], "memsize":500})" "\n"
    R"({"address":"0x3008", "type":"CLASS", "class":"0x2018", "name":"String", "references":[], "memsize":500})" "\n"
    R"({"type":"SHAPE", "id":1})" "\n";

DumpHeap Read(const std::string& s, DumpReadStats* st = nullptr) { return ReadDumpBytes(s.data(), s.size(), {}, st); }

std::string ErrorOf(const std::string& s) {
  try {
    Read(s);
  } catch (const DumpError& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(DumpReader, ReadsRecordsRootsNamesAndSites) {
  DumpReadStats st;
  DumpHeap h = Read(kDump, &st);
  EXPECT_EQ(h.size(), 8u);
  EXPECT_EQ(st.roots, 2u);
  EXPECT_EQ(st.skipped, 1u);
  ASSERT_EQ(h.roots.size(), 2u);
  EXPECT_EQ(h.roots[0].name, "vm");
  EXPECT_EQ(h.address[0], 0x1000u);
  EXPECT_EQ(h.type[0], kDumpModule);
  EXPECT_EQ(h.names.Get(h.name[0]), "Registry");
  // String prefixes stop before the first digit, so numbered strings share one.
  EXPECT_EQ(h.prefixes.Get(h.name[3]), "\"key-…\"");
  EXPECT_EQ(h.prefixes.Get(h.name[5]), "\"pppppppppppppppp…\"");
  ASSERT_TRUE(h.has_sites);
  EXPECT_EQ(h.SiteName(h.site[2]), "a.rb:3");
  EXPECT_EQ(h.site[0], 0u);
  EXPECT_EQ(h.generation[4], 8u);
  EXPECT_EQ(h.generation[0], DumpHeap::kNoGeneration);
  EXPECT_EQ(h.ref_begin[5] - h.ref_begin[4], 2u);
}

// string_prefix_bytes 0 (AnalyzeDump's default: no string contents in a
// profile): no string gets a name, and nothing of a value is interned.
TEST(DumpReader, NoStringNamesWithoutPrefixBytes) {
  DumpReadOptions o;
  o.string_prefix_bytes = 0;
  std::string dump = std::string(kDump) +
                     R"({"address":"0x1030", "type":"STRING", "class":"0x3008", "bytesize":0, "value":"", "memsize":40})" "\n";
  DumpHeap h = ReadDumpBytes(dump.data(), dump.size(), o);
  EXPECT_EQ(h.name[3], 0u);
  EXPECT_EQ(h.name[5], 0u);
  EXPECT_EQ(h.name[8], 0u);
  for (uint32_t id = 0; id < h.prefixes.size(); id++) EXPECT_EQ(h.prefixes.Get(id).find("key"), std::string::npos);
  EXPECT_EQ(h.names.Get(h.name[0]), "Registry");  // class and module names are the program's, not data
}

TEST(DumpReader, GraphDominatorsAndNames) {
  DumpHeap h = Read(kDump);
  DumpGraphStats gs;
  HeapGraph g = BuildDumpGraph(h, &gs);
  EXPECT_EQ(gs.dangling_references, 1u);
  EXPECT_EQ(gs.first_dangling_address, 0xdead0u);
  EXPECT_EQ(gs.unreachable_objects, 2u);  // the Hash and String classes: no root refers to them here
  MappedVector<uint32_t> idom = ComputeDominators(g);
  MappedVector<uint64_t> retained = RetainedSizes(g, idom);
  uint32_t hash = 0, obj = 0, payload = 0;
  for (uint32_t v = g.first_object_node(); v < g.node_count(); v++) {
    if (g.address(v) == 0x1010) hash = v;
    if (g.address(v) == 0x1020) obj = v;
    if (g.address(v) == 0x1028) payload = v;
  }
  ASSERT_TRUE(hash && obj && payload);
  EXPECT_EQ(retained[hash], 160u + 40 + 40 + 5041);
  EXPECT_EQ(g.name(g.class_name(obj)), "Session");
  EXPECT_EQ(g.name(g.class_name(hash)), "Hash");
  EXPECT_EQ(g.name(g.edge_name(hash)), "in Registry");
  EXPECT_EQ(g.name(g.edge_name(obj)), "via Hash");
  EXPECT_EQ(g.name(g.edge_name(payload)), "via Session \"pppppppppppppppp…\"");
}

// Ruby 3.4's vm root: the Ractor, a registered address (a Hash), then the
// VM's bucket of pinned objects (hidden DATA "VM/pin_array_list"), whose
// references are Object (a CLASS the bucket alone reaches from vm) and the
// next, older bucket with Gem. Object holds Registry. Read as 3.3 reads:
// Object and Gem one hop below vm, Registry by Object, the registered Hash
// in a "global_list" category (roots/vm_roots.h).
const char kDump34[] =
    R"({"type":"ROOT", "root":"vm", "references":["0x1000", "0x1008", "0x1010", "0x1030"]})" "\n"
    R"({"type":"ROOT", "root":"global_tbl", "references":[]})" "\n"
    R"({"address":"0x1000", "type":"DATA", "class":"0x1040", "struct":"ractor", "references":["0x1040"], "memsize":400})" "\n"
    R"({"address":"0x1008", "type":"HASH", "class":"0x3000", "size":0, "references":[], "memsize":160})" "\n"
    R"({"address":"0x1010", "type":"DATA", "struct":"VM/pin_array_list", "references":["0x1018", "0x1020"], "memsize":8216})" "\n"
    R"({"address":"0x1018", "type":"DATA", "struct":"VM/pin_array_list", "references":["0x1028"], "memsize":8216})" "\n"
    R"({"address":"0x1020", "type":"CLASS", "class":"0x2000", "name":"Object", "references":["0x1038"], "memsize":600})" "\n"
    R"({"address":"0x1028", "type":"MODULE", "class":"0x2008", "name":"Gem", "references":[], "memsize":600})" "\n"
    R"({"address":"0x1030", "type":"STRING", "class":"0x3008", "bytesize":3, "chilled":true, "memsize":40})" "\n"
    R"({"address":"0x1038", "type":"MODULE", "class":"0x2010", "name":"Registry", "references":[], "memsize":400})" "\n"
    R"({"address":"0x1040", "type":"CLASS", "class":"0x2018", "name":"Ractor", "references":["0x1020"], "memsize":600})" "\n";

TEST(DumpReader, Ruby34VmRootReadsAs33) {
  DumpHeap h = Read(kDump34);
  ASSERT_EQ(h.pinned_object_lists.size(), 2u);
  ASSERT_EQ(h.ractors.size(), 1u);
  HeapGraph g = BuildDumpGraph(h);
  ASSERT_EQ(g.category_count(), 3u);
  EXPECT_EQ(g.name(g.edge_name(1)), "vm");
  EXPECT_EQ(g.name(g.edge_name(2)), "global_list");
  EXPECT_EQ(g.name(g.edge_name(3)), "global_tbl");
  auto node = [&](uint64_t address) {
    for (uint32_t v = g.first_object_node(); v < g.node_count(); v++)
      if (g.address(v) == address) return v;
    return 0u;
  };
  // Object and Gem straight from vm, Registry through Object: not through
  // the Ractor class (a superclass edge) nor the bucket.
  EXPECT_EQ(g.tree_parent(node(0x1020)), 1u);
  EXPECT_EQ(g.tree_parent(node(0x1028)), 1u);
  EXPECT_EQ(g.tree_parent(node(0x1038)), node(0x1020));
  EXPECT_EQ(g.tree_parent(node(0x1008)), 2u);
  EXPECT_EQ(g.name(g.edge_name(node(0x1008))), "in global_list");
  EXPECT_EQ(g.tree_parent(node(0x1018)), 1u) << "every bucket is a vm root, as 3.3's mark_object_ary arrays are";
}

TEST(DumpReader, ClearErrorsWithLineNumbers) {
  std::string root = R"({"type":"ROOT","root":"vm","references":[]})" "\n";
  EXPECT_EQ(ErrorOf(""), "empty file");
  EXPECT_EQ(ErrorOf("\n\n"), "empty file: no records");
  EXPECT_NE(ErrorOf(root + "not json\n").find("line 2: not a JSON line"), std::string::npos) << ErrorOf(root + "not json\n");
  EXPECT_EQ(ErrorOf(root + R"({"address":"0x10","type":"WIDGET"})" "\n"), "line 2: unknown type \"WIDGET\"");
  EXPECT_EQ(ErrorOf(root + R"({"address":"0x10","type":"STRING")"), "line 2: truncated last line (no newline and not complete JSON)");
  EXPECT_EQ(ErrorOf(R"({"address":"0x10","type":"STRING"})" "\n"), "no ROOT records: not an ObjectSpace.dump_all file (ObjectSpace.dump of one object has none)");
  EXPECT_EQ(ErrorOf(root + R"({"type":"STRING"})" "\n"), "line 2: record without \"address\"");
  EXPECT_EQ(ErrorOf(root + R"({"address":"zz","type":"STRING"})" "\n"), "line 2: \"address\" is not an address");
  EXPECT_EQ(ErrorOf(root + R"({"address":"0x10","type":"STRING","references":[1]})" "\n"), "line 2: \"references\" is not a string");
  EXPECT_EQ(ErrorOf(root + "[1,2]\n"), "line 2: not a JSON object");
  // A complete last line without its newline is fine.
  EXPECT_EQ(Read(root + R"({"address":"0x10","type":"STRING"})").size(), 1u);
}

// Mutates the sample dump (truncation, flipped bytes, deleted and
// duplicated lines) and reads it: every outcome is a heap or a DumpError,
// never a crash (the core test build runs under ASan + UBSan).
TEST(DumpReader, FuzzedDumpsNeverCrash) {
  std::string base = kDump;
  uint64_t seed = 12345;
  auto rnd = [&]() { return (seed = seed * 6364136223846793005ull + 1442695040888963407ull) >> 33; };
  int ok = 0, errors = 0;
  for (int i = 0; i < 400; i++) {
    std::string s = base;
    switch (rnd() % 4) {
      case 0: s.resize(rnd() % s.size()); break;
      case 1:
        for (int k = 0, n = 1 + rnd() % 4; k < n; k++) s[rnd() % s.size()] = static_cast<char>(rnd() & 0xff);
        break;
      case 2: {
        size_t at = rnd() % s.size(), nl = s.find('\n', at);
        s.erase(at, nl == std::string::npos ? std::string::npos : nl - at + 1);
        break;
      }
      default: {
        size_t at = s.find('\n', rnd() % s.size());
        if (at != std::string::npos) s.insert(at + 1, s.substr(0, s.find('\n') + 1));
      }
    }
    try {
      DumpHeap h = Read(s);
      HeapGraph g = BuildDumpGraph(h);
      MappedVector<uint32_t> idom = ComputeDominators(g);
      RetainedSizes(g, idom);
      ok++;
    } catch (const DumpError&) {
      errors++;
    }
  }
  EXPECT_GT(ok, 0);
  EXPECT_GT(errors, 0);
}

}  // namespace
}  // namespace fathom

namespace fathom {
namespace {

// Everything a DumpHeap holds, as text, to compare two reads.
std::string Describe(const DumpHeap& h) {
  std::string s;
  for (size_t i = 0; i < h.size(); i++) {
    s += std::to_string(h.address[i]) + " " + std::to_string(h.classes.Get(h.klass[i])) + " " +
         std::to_string(h.memsize[i]) + " " + std::to_string(h.type[i]) + " [";
    for (uint32_t r = h.ref_begin[i]; r < h.ref_begin[i + 1]; r++) s += std::to_string(h.refs[r]) + ",";
    s += "] ";
    if (h.type[i] == kDumpString) s += std::string(h.prefixes.Get(h.name[i]));
    else s += std::string(h.names.Get(h.name[i]));
    if (h.has_sites) s += " " + h.SiteName(h.site[i]);
    if (h.has_generations) s += " " + std::to_string(h.generation[i]);
    s += "\n";
  }
  for (const auto& r : h.roots) {
    s += r.name + ":";
    for (uint64_t a : r.refs) s += std::to_string(a) + ",";
    s += "\n";
  }
  return s;
}

std::string ReadWith(const std::string& text, bool dom, DumpReadStats* st) {
  DumpReadOptions o;
  o.dom_parser_only = dom;
  try {
    return Describe(ReadDumpBytes(text.data(), text.size(), o, st));
  } catch (const DumpError& e) {
    return std::string("error: ") + e.what();
  }
}

// The scanner is a fast path, never a second opinion: on every input, the
// default reader (scanner, DOM parser for the lines it leaves) and the DOM
// parser alone give the same heap or the same error. Lines in dump_all's
// shapes and their mutations (flipped, inserted and deleted bytes: broken
// strings, numbers, literals, escapes, nesting, duplicate keys).
TEST(DumpScanner, SameRecordsAndErrorsAsTheDomParser) {
  const std::vector<std::string> lines = {
      R"({"type":"ROOT", "root":"vm", "references":["0x1000", "0x1008"]})",
      R"({"address":"0x1000", "type":"MODULE", "class":"0x2000", "name":"Registry", "references":["0x1010"], "memsize":400, "flags":{"wb_protected":true, "old":true}})",
      R"({"address":"0x1010", "type":"HASH", "class":"0x3000", "size":1, "references":["0x1018"], "file":"a.rb", "line":3, "method":"new", "generation":7, "memsize":160, "flags":{"wb_protected":true}})",
      R"({"address":"0x1018", "type":"STRING", "class":"0x3008", "frozen":true, "embedded":true, "fstring":true, "bytesize":5, "value":"key-1", "encoding":"UTF-8", "coderange":"7bit", "memsize":40})",
      R"({"address":"0x1020", "type":"STRING", "class":"0x3008", "bytesize":9, "value":"a\"b\\c\n\t/", "memsize":40})",
      R"({"address":"0x1028", "type":"STRING", "class":"0x3008", "bytesize":90, "value":"pppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppppp\n", "memsize":40})",
      R"({"address":"0x1030", "type":"STRING", "class":"0x3008", "value":"caf\u00e9 \u00e9t\u00e9", "memsize":-1})",
      R"({"address":"0x1038", "type":"DATA", "class":"0x3010", "struct":"proc", "name":null, "references":[], "memsize":0.5e3, "line":-4, "generation":12.0})",
      R"({"address":"0x1040", "type":"IMEMO", "imemo_type":"ment", "ids":[1, [2, {"a":[]}]], "memsize":80, "line":7, "line":"x", "generation":3})",
      R"({"address":"0x1048", "type":"OBJECT", "class":"0x3018", "ivars":2, "references":["0x1050"], "references":["0x1058"], "memsize":40})",
      R"(  {"address" : "0x1050" , "type" : "FLOAT" , "value" : 1.5e10 , "memsize" : 18446744073709551615 }  )",
      R"({"type":"SHAPE", "id":1, "parent_id":0, "depth":0, "shape_type":"ROOT"})",
      R"({"address":"0x1058", "type":"CLASS", "class":"0x3020", "name":"Caf\u00e9", "file":"/very/long/path/to/some/file/in/a/gem/lib/thing.rb", "line":123456, "memsize":4096})",
  };
  std::string base;
  for (const auto& l : lines) base += l + "\n";
  DumpReadStats st;
  std::string want = ReadWith(base, true, &st);
  EXPECT_EQ(ReadWith(base, false, &st), want);
  EXPECT_LT(st.dom_lines, lines.size());  // the scanner took some
  EXPECT_GT(st.dom_lines, 0u);            // and left the \u, fraction and duplicate-key lines

  uint64_t seed = 777;
  auto rnd = [&]() { return (seed = seed * 6364136223846793005ull + 1442695040888963407ull) >> 33; };
  const char bytes[] = "{}[]\",:\\ 0123456789-.eEtruefalsnx\x01\x7f\xc3\xa9";
  int checked = 0, accepted = 0;
  // 3000 mutations: ~4 s under ASan (each read sets up a parser and a 1 MiB buffer).
  for (int i = 0; i < 3000; i++) {
    std::string s = lines[rnd() % lines.size()];
    for (int k = 0, n = 1 + static_cast<int>(rnd() % 3); k < n; k++) {
      size_t at = rnd() % (s.size() + 1);
      char c = bytes[rnd() % (sizeof bytes - 1)];
      switch (rnd() % 3) {
        case 0: if (at < s.size()) s[at] = c; break;
        case 1: s.insert(at, 1, c); break;
        default: if (at < s.size()) s.erase(at, 1);
      }
    }
    std::string text = lines[0] + "\n" + s + "\n";
    std::string dom = ReadWith(text, true, &st);
    ASSERT_EQ(ReadWith(text, false, &st), dom) << s;
    checked++;
    if (dom.rfind("error", 0) != 0) accepted++;
  }
  EXPECT_GT(accepted, 300);
  EXPECT_GT(checked - accepted, 300);
}

}  // namespace
}  // namespace fathom
