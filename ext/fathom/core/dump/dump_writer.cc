#include "dump/dump_writer.h"

#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <new>

#include "base/utf8.h"
#include "encode/gzip.h"

namespace fathom {

DumpWriter::DumpWriter(int fd, int gzip_level, size_t buffer_bytes)
    : fd_(fd), gzip_level_(gzip_level), capacity_(buffer_bytes < 4096 ? 4096 : buffer_bytes) {}

DumpWriter::~DumpWriter() {
  if (z_) {
    deflateEnd(z_);
    delete z_;
  }
  free(buf_);
  free(zbuf_);
}

bool DumpWriter::Start() {
  buf_ = static_cast<char*>(malloc(capacity_));
  if (!buf_) {
    Fail("out of memory for the dump's buffer");
    return false;
  }
  if (gzip_level_ < 0) return true;
  if (gzip_level_ > 9) {
    Fail("gzip level must be -1..9");
    return false;
  }
  zbuf_ = static_cast<char*>(malloc(capacity_));
  z_ = new (std::nothrow) z_stream{};
  if (!zbuf_ || !z_) {
    Fail("out of memory for the dump's buffer");
    return false;
  }
  // 15 + 16: a gzip wrapper; its header carries the comment by which
  // Fathom recognizes its own files (encode/gzip.h).
  if (deflateInit2(z_, gzip_level_, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
    delete z_;
    z_ = nullptr;
    Fail("zlib's deflateInit2 failed");
    return false;
  }
  static gz_header header{};  // zlib keeps a pointer to it until the header is written
  header.comment = reinterpret_cast<Bytef*>(const_cast<char*>(kGzipComment));
  header.os = 3;  // Unix
  deflateSetHeader(z_, &header);
  return true;
}

void DumpWriter::Fail(const std::string& why) {
  if (error_.empty()) error_ = why;
}

void DumpWriter::WriteAll(const char* data, size_t size) {
  while (size > 0 && ok()) {
    ssize_t n = write(fd_, data, size);
    if (n < 0) {
      if (errno == EINTR) continue;
      Fail(std::string("write failed: ") + strerror(errno));
      return;
    }
    data += n;
    size -= static_cast<size_t>(n);
    bytes_written_ += static_cast<uint64_t>(n);
  }
}

void DumpWriter::Flush(bool finish) {
  if (!ok()) {
    used_ = 0;
    return;
  }
  if (!z_) {
    WriteAll(buf_, used_);
    used_ = 0;
    return;
  }
  z_->next_in = reinterpret_cast<Bytef*>(buf_);
  z_->avail_in = static_cast<uInt>(used_);
  int flush = finish ? Z_FINISH : Z_NO_FLUSH;
  for (;;) {
    z_->next_out = reinterpret_cast<Bytef*>(zbuf_);
    z_->avail_out = static_cast<uInt>(capacity_);
    int rc = deflate(z_, flush);
    if (rc == Z_STREAM_ERROR) {
      Fail("zlib's deflate failed");
      break;
    }
    WriteAll(zbuf_, capacity_ - z_->avail_out);
    if (!ok()) break;
    if (finish ? rc == Z_STREAM_END : (z_->avail_in == 0 && z_->avail_out != 0)) break;
  }
  used_ = 0;
}

void DumpWriter::Put(std::string_view s) {
  while (!s.empty()) {
    if (used_ == capacity_) Flush(false);
    size_t n = std::min(s.size(), capacity_ - used_);
    memcpy(buf_ + used_, s.data(), n);
    used_ += n;
    s.remove_prefix(n);
  }
}

void DumpWriter::PutChar(char c) {
  if (used_ == capacity_) Flush(false);
  buf_[used_++] = c;
}

void DumpWriter::PutHex(uint64_t v) {
  char tmp[20];
  int n = 0;
  do {
    tmp[n++] = "0123456789abcdef"[v & 15];
    v >>= 4;
  } while (v);
  char out[22] = {'0', 'x'};
  for (int i = 0; i < n; i++) out[2 + i] = tmp[n - 1 - i];
  Put(std::string_view(out, static_cast<size_t>(n) + 2));
}

void DumpWriter::PutDecimal(uint64_t v) {
  char tmp[24];
  int n = 0;
  do {
    tmp[n++] = static_cast<char>('0' + v % 10);
    v /= 10;
  } while (v);
  char out[24];
  for (int i = 0; i < n; i++) out[i] = tmp[n - 1 - i];
  Put(std::string_view(out, static_cast<size_t>(n)));
}

void DumpWriter::PutKey(const char* key) {
  Put(", \"");
  Put(key);
  Put("\":");
}

void DumpWriter::Root(const char* category, uint64_t address) {
  if (!root_category_ || strcmp(category, root_category_) != 0) {
    EndRoots();
    Put("{\"type\":\"ROOT\", \"root\":");
    root_category_ = category;
    // A category name is Ruby's own C string literal ("vm", "global_tbl").
    String(nullptr, category);
    Put(", \"references\":[\"");
  } else {
    Put(", \"");
  }
  PutHex(address);
  PutChar('"');
}

void DumpWriter::EndRoots() {
  if (!root_category_) return;
  Put("]}\n");
  lines_++;
  root_category_ = nullptr;
}

void DumpWriter::BeginObject(uint64_t address, const char* type) {
  EndRoots();
  in_object_ = true;
  in_references_ = any_reference_ = false;
  Put("{\"address\":\"");
  PutHex(address);
  Put("\", \"type\":\"");
  Put(type);
  PutChar('"');
}

void DumpWriter::CloseReferences() {
  if (!in_references_) return;
  PutChar(']');
  in_references_ = false;
}

void DumpWriter::Address(const char* key, uint64_t address) {
  CloseReferences();
  PutKey(key);
  PutChar('"');
  PutHex(address);
  PutChar('"');
}

void DumpWriter::Number(const char* key, uint64_t value) {
  CloseReferences();
  PutKey(key);
  PutDecimal(value);
}

void DumpWriter::True(const char* key) {
  CloseReferences();
  PutKey(key);
  Put("true");
}

void DumpWriter::String(const char* key, std::string_view value) {
  if (key) {
    CloseReferences();
    PutKey(key);
  }
  bool raw_high = IsValidUtf8(value);
  PutChar('"');
  size_t start = 0;  // a run of bytes that need no escape, written at once
  for (size_t i = 0; i < value.size(); i++) {
    unsigned char c = static_cast<unsigned char>(value[i]);
    bool plain = c >= 0x20 && c != '"' && c != '\\' && (c < 0x80 || raw_high);
    if (plain) continue;
    Put(value.substr(start, i - start));
    start = i + 1;
    switch (c) {
      case '"': Put("\\\""); break;
      case '\\': Put("\\\\"); break;
      case '\n': Put("\\n"); break;
      case '\t': Put("\\t"); break;
      case '\r': Put("\\r"); break;
      case '\b': Put("\\b"); break;
      case '\f': Put("\\f"); break;
      default: {
        char esc[7] = {'\\', 'u', '0', '0', "0123456789abcdef"[c >> 4], "0123456789abcdef"[c & 15], 0};
        Put(std::string_view(esc, 6));
      }
    }
  }
  Put(value.substr(start));
  PutChar('"');
}

void DumpWriter::Reference(uint64_t address) {
  if (!in_references_) {
    if (any_reference_) {
      // References come in one run; a second run joins a new array key
      // nobody reads twice: keep dump_all's single array instead.
      Fail("DumpWriter: references must be written together");
      return;
    }
    Put(", \"references\":[\"");
    in_references_ = any_reference_ = true;
  } else {
    Put(", \"");
  }
  PutHex(address);
  PutChar('"');
}

void DumpWriter::EndObject() {
  CloseReferences();
  Put("}\n");
  in_object_ = false;
  lines_++;
}

bool DumpWriter::Finish() {
  EndRoots();
  if (buf_) Flush(true);
  return ok();
}

}  // namespace fathom
