// The writing side of heap dumps: ObjectSpace.dump_all's JSON-lines shape,
// written by `fathom dump`'s forked child (ruby/dump/forked_dump.cc;
// docs/internals/dump.md, "Writing dumps: fathom dump").
//
// One line per record, as dump_all writes them:
//   {"type":"ROOT", "root":"vm", "references":["0x7f..", ...]}
//   {"address":"0x7f..", "type":"STRING", "class":"0x7f..", "bytesize":5, "memsize":40}
// The writer knows nothing of Ruby: the caller gives addresses, type
// names and field values. Output goes to a file descriptor through one
// fixed buffer, plain or as one gzip member (zlib, header comment
// kGzipComment so that AtomicFile recognizes a file Fathom wrote). Memory
// is the buffer (and zlib's state), allocated in Start: nothing grows with
// the heap. A failed write(2) or zlib call is sticky: ok() turns false,
// error() says why, and everything after is ignored, so a caller walking
// the heap from inside Ruby's callbacks checks once per page, not per call.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

struct z_stream_s;

namespace fathom {

class DumpWriter {
 public:
  // gzip_level: -1 plain JSON lines; 0..9 zlib's level for a gzip member.
  DumpWriter(int fd, int gzip_level, size_t buffer_bytes = size_t{1} << 20);
  ~DumpWriter();
  DumpWriter(const DumpWriter&) = delete;
  DumpWriter& operator=(const DumpWriter&) = delete;

  // Allocates the buffers and zlib's state. False (with error()) on failure.
  bool Start();

  // ROOT lines: each Root call with a category different from the last
  // one's closes the previous line and opens a new one. Roots of one
  // category arrive together from Ruby (rb_objspace_reachable_objects_from_root).
  void Root(const char* category, uint64_t address);
  void EndRoots();

  // One object line: Begin, then fields, then references, then fields
  // again if wanted (a field after references closes the array), End.
  void BeginObject(uint64_t address, const char* type);
  void Address(const char* key, uint64_t address);  // "key":"0x..."
  void Number(const char* key, uint64_t value);      // "key":123
  void True(const char* key);                        // "key":true
  // "key":"..." JSON-escaped. Bytes >= 0x80 are written as they are when
  // the whole value is valid UTF-8, else each as \u00XX (a JSON reader
  // must not fail on a binary class name).
  void String(const char* key, std::string_view value);
  void Reference(uint64_t address);
  void EndObject();

  // Flushes everything (and gzip's trailer). The descriptor stays open.
  bool Finish();

  bool ok() const { return error_.empty(); }
  const std::string& error() const { return error_; }
  uint64_t lines() const { return lines_; }
  uint64_t bytes_written() const { return bytes_written_; }  // to the descriptor

 private:
  void Put(std::string_view s);
  void PutChar(char c);
  void PutHex(uint64_t v);
  void PutDecimal(uint64_t v);
  void PutKey(const char* key);
  void CloseReferences();
  void Flush(bool finish);
  void WriteAll(const char* data, size_t size);
  void Fail(const std::string& why);

  int fd_;
  int gzip_level_;
  size_t capacity_;
  char* buf_ = nullptr;  // JSON text waiting
  size_t used_ = 0;
  char* zbuf_ = nullptr;  // deflate's output
  z_stream_s* z_ = nullptr;
  std::string error_;
  const char* root_category_ = nullptr;
  bool in_object_ = false, in_references_ = false, any_reference_ = false;
  uint64_t lines_ = 0, bytes_written_ = 0;
};

}  // namespace fathom
