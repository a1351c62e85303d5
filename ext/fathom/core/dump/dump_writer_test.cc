#include "dump/dump_writer.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <string>
#include <vector>

#include "dump/dump_graph.h"
#include "dump/dump_reader.h"
#include "testing/gunzip.h"
#include "testing/mini_json.h"

namespace fathom {
namespace {

// What the writer wrote to a pipe-less temp file, read back whole.
class TempFile {
 public:
  TempFile() {
    char name[] = "/tmp/fathom-dump-writer-XXXXXX";
    fd_ = mkstemp(name);
    path_ = name;
  }
  ~TempFile() {
    close(fd_);
    unlink(path_.c_str());
  }
  int fd() const { return fd_; }
  const std::string& path() const { return path_; }
  std::string Contents() const {
    std::string out;
    FILE* f = fopen(path_.c_str(), "rb");
    char buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0) out.append(buf, n);
    fclose(f);
    return out;
  }

 private:
  int fd_;
  std::string path_;
};

// A tiny heap in the writer's calls: a module holding a hash holding an
// object and a string; the classes named.
void WriteSmallHeap(DumpWriter* w) {
  w->Root("vm", 0x1000);
  w->Root("vm", 0x3000);
  w->Root("global_tbl", 0x1008);
  w->BeginObject(0x1000, "MODULE");
  w->Address("class", 0x2000);
  w->String("name", "Registry");
  w->Reference(0x1010);
  w->Number("memsize", 400);
  w->EndObject();
  w->BeginObject(0x1008, "CLASS");
  w->Address("class", 0x2008);
  w->String("name", "Session");
  w->Number("memsize", 600);
  w->EndObject();
  w->BeginObject(0x1010, "HASH");
  w->Address("class", 0x3000);
  w->Number("size", 2);
  w->Reference(0x1018);
  w->Reference(0x1020);
  w->Number("memsize", 160);
  w->EndObject();
  w->BeginObject(0x1018, "STRING");
  w->Address("class", 0x3008);
  w->Number("bytesize", 9);
  w->String("value", "key-\"1\"\n\x01");
  w->Number("memsize", 40);
  w->EndObject();
  w->BeginObject(0x1020, "OBJECT");
  w->Address("class", 0x1008);
  w->Number("memsize", 40);
  w->EndObject();
  w->BeginObject(0x3000, "CLASS");
  w->Address("class", 0x2010);
  w->String("name", "Hash");
  w->Number("memsize", 500);
  w->EndObject();
}

TEST(DumpWriter, LinesAreJsonInDumpAllsShape) {
  TempFile f;
  DumpWriter w(f.fd(), -1, 4096);
  ASSERT_TRUE(w.Start());
  WriteSmallHeap(&w);
  ASSERT_TRUE(w.Finish()) << w.error();
  std::string text = f.Contents();
  EXPECT_EQ(w.bytes_written(), text.size());
  EXPECT_EQ(w.lines(), 8u);
  std::vector<test_util::json::Value> lines;
  size_t start = 0;
  for (size_t nl; (nl = text.find('\n', start)) != std::string::npos; start = nl + 1)
    lines.push_back(test_util::json::Parse(text.substr(start, nl - start)));
  ASSERT_EQ(lines.size(), 8u);
  EXPECT_EQ(start, text.size());  // every line ends with a newline
  EXPECT_EQ(lines[0]["type"].as_string(), "ROOT");
  EXPECT_EQ(lines[0]["root"].as_string(), "vm");
  ASSERT_EQ(lines[0]["references"].size(), 2u);
  EXPECT_EQ(lines[0]["references"][1].as_string(), "0x3000");
  EXPECT_EQ(lines[1]["root"].as_string(), "global_tbl");
  EXPECT_EQ(lines[2]["address"].as_string(), "0x1000");
  EXPECT_EQ(lines[2]["references"][0].as_string(), "0x1010");
  EXPECT_EQ(lines[2]["memsize"].as_int(), 400);  // a field after the references
  EXPECT_EQ(lines[5]["value"].as_string(), "key-\"1\"\n\x01");
  EXPECT_EQ(lines[6].find("references"), nullptr);  // none: no empty array either
}

// The reader of `fathom analyze` reads what the writer wrote, gzipped too,
// into the same graph: names, references, sizes.
TEST(DumpWriter, FathomAnalyzesReaderReadsItPlainAndGzipped) {
  for (int level : {-1, 1}) {
    TempFile f;
    DumpWriter w(f.fd(), level, 4096);
    ASSERT_TRUE(w.Start());
    WriteSmallHeap(&w);
    ASSERT_TRUE(w.Finish()) << w.error();
    DumpReadStats st;
    DumpHeap h = ReadDump(f.path(), {}, &st);
    EXPECT_EQ(st.gzipped, level >= 0);
    EXPECT_EQ(h.size(), 6u);
    EXPECT_EQ(st.roots, 2u);
    EXPECT_EQ(h.names.Get(h.name[0]), "Registry");
    DumpGraphStats gs;
    HeapGraph g = BuildDumpGraph(h, &gs);
    EXPECT_EQ(gs.dangling_references, 0u);
    uint32_t obj = 0;
    for (uint32_t v = g.first_object_node(); v < g.node_count(); v++)
      if (g.address(v) == 0x1020) obj = v;
    ASSERT_NE(obj, 0u);
    EXPECT_EQ(g.name(g.class_name(obj)), "Session");
    if (level >= 0) {
      std::string bytes = f.Contents();
      // FCOMMENT "fathom": AtomicFile recognizes the file as Fathom's.
      ASSERT_GT(bytes.size(), 20u);
      EXPECT_EQ(static_cast<unsigned char>(bytes[3]) & 0x10, 0x10);
      EXPECT_EQ(bytes.substr(10, 7), std::string("fathom\0", 7));
      EXPECT_NE(GzipDecompress(bytes).find("\"name\":\"Registry\""), std::string::npos);
    }
  }
}

// More than one buffer of output, gzipped: the stream stays whole.
TEST(DumpWriter, ManyBuffersOfOutput) {
  TempFile f;
  DumpWriter w(f.fd(), 6, 4096);
  ASSERT_TRUE(w.Start());
  w.Root("vm", 0x10);
  for (uint64_t i = 0; i < 20000; i++) {
    w.BeginObject(0x10 + i * 40, "ARRAY");
    w.Number("length", 1);
    if (i + 1 < 20000) w.Reference(0x10 + (i + 1) * 40);
    w.Number("memsize", 40);
    w.EndObject();
  }
  ASSERT_TRUE(w.Finish()) << w.error();
  DumpReadStats st;
  DumpHeap h = ReadDump(f.path(), {}, &st);
  EXPECT_EQ(h.size(), 20000u);
  EXPECT_EQ(w.lines(), 20001u);
}

// Bytes that are not UTF-8 are escaped one by one; valid UTF-8 stays.
TEST(DumpWriter, EscapesInvalidUtf8AndKeepsValid) {
  TempFile f;
  DumpWriter w(f.fd(), -1);
  ASSERT_TRUE(w.Start());
  w.BeginObject(0x10, "CLASS");
  w.String("name", "Caf\xc3\xa9");
  w.String("value", "\xff\xfe" "a");
  w.EndObject();
  ASSERT_TRUE(w.Finish());
  std::string text = f.Contents();
  auto v = test_util::json::Parse(text.substr(0, text.size() - 1));
  EXPECT_EQ(v["name"].as_string(), "Caf\xc3\xa9");
  EXPECT_NE(text.find("\\u00ff\\u00fea"), std::string::npos);
}

TEST(DumpWriter, AFailedWriteIsStickyAndSaysWhy) {
  int fds[2];
  ASSERT_EQ(pipe(fds), 0);
  close(fds[1]);
  DumpWriter w(fds[0], -1, 4096);  // the read end: write(2) fails with EBADF
  ASSERT_TRUE(w.Start());
  for (int i = 0; i < 1000; i++) {
    w.BeginObject(0x10, "OBJECT");
    w.EndObject();
  }
  EXPECT_FALSE(w.Finish());
  EXPECT_NE(w.error().find("write failed"), std::string::npos) << w.error();
  close(fds[0]);
}

}  // namespace
}  // namespace fathom
