// ProtoWriter: the small subset of the protocol buffer wire format that a
// pprof profile needs, in the spirit of Go's runtime/pprof protobuf.go.
//
// Everything is appended to one std::string. Nested messages are written
// body first; EndMessage then moves the body right to make room for its
// (tag, length) header. Profile submessages are tens of bytes, so that move
// is cheaper than computing every message's size in a separate pass.
//
// Field numbers are the caller's business; the writer knows only wire types.
// Scalar "Opt" setters skip zero values, matching proto3 defaults (a reader
// sees the same value either way, and profiles get noticeably smaller).
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace fathom {

class ProtoWriter {
 public:
  // Appends to `initial` (e.g. an encoded message whose repeated fields
  // continue here: protobuf concatenates them).
  explicit ProtoWriter(std::string initial = {}) : buf_(std::move(initial)) {}
  enum WireType : uint32_t { kVarint = 0, kLengthDelimited = 2 };

  // Bytes a varint takes: 7 payload bits per byte.
  static size_t VarintSize(uint64_t x) {
    size_t n = 1;
    while (x >= 0x80) {
      x >>= 7;
      n++;
    }
    return n;
  }

  void Varint(uint64_t x) {
    char tmp[10];
    size_t n = 0;
    while (x >= 0x80) {
      tmp[n++] = static_cast<char>(x | 0x80);
      x >>= 7;
    }
    tmp[n++] = static_cast<char>(x);
    buf_.append(tmp, n);
  }

  void Tag(uint32_t field, WireType type) { Varint((uint64_t{field} << 3) | type); }
  // Bytes a length-delimited field of `body` bytes takes, header included.
  static size_t LengthDelimitedSize(uint32_t field, size_t body) {
    return VarintSize((uint64_t{field} << 3) | kLengthDelimited) + VarintSize(body) + body;
  }
  // The header of a length-delimited field whose `body` bytes the caller
  // writes next (for bodies sized in advance, so nothing needs moving).
  void LengthDelimitedHeader(uint32_t field, size_t body) {
    Tag(field, kLengthDelimited);
    Varint(body);
  }

  // int64 fields are plain varints of the two's-complement bits (not zigzag),
  // so negative numbers take ten bytes, as protoc would write them.
  void Uint64(uint32_t field, uint64_t x) {
    Tag(field, kVarint);
    Varint(x);
  }
  void Int64(uint32_t field, int64_t x) { Uint64(field, static_cast<uint64_t>(x)); }
  void Uint64Opt(uint32_t field, uint64_t x) {
    if (x != 0) Uint64(field, x);
  }
  void Int64Opt(uint32_t field, int64_t x) {
    if (x != 0) Int64(field, x);
  }
  void BoolOpt(uint32_t field, bool x) {
    if (x) Uint64(field, 1);
  }

  void Bytes(uint32_t field, std::string_view s) {
    Tag(field, kLengthDelimited);
    Varint(s.size());
    buf_.append(s.data(), s.size());
  }

  // Packed repeated varints: one length-delimited field holding the varints
  // back to back. The length is known up front, so no move is needed. A
  // packed field with no elements is omitted, as an empty repeated field is.
  template <typename T>
  void PackedVarints(uint32_t field, const T* xs, size_t n) {
    if (n == 0) return;
    size_t len = 0;
    for (size_t i = 0; i < n; i++) len += VarintSize(static_cast<uint64_t>(xs[i]));
    Tag(field, kLengthDelimited);
    Varint(len);
    for (size_t i = 0; i < n; i++) Varint(static_cast<uint64_t>(xs[i]));
  }
  template <typename T>
  void PackedVarints(uint32_t field, const std::vector<T>& xs) {
    PackedVarints(field, xs.data(), xs.size());
  }

  // Usage: size_t m = w.StartMessage(); ...fields...; w.EndMessage(field, m);
  size_t StartMessage() const { return buf_.size(); }
  void EndMessage(uint32_t field, size_t start) {
    size_t body = buf_.size() - start;
    // Append the header, then rotate it in front of the body.
    Tag(field, kLengthDelimited);
    Varint(body);
    size_t header = buf_.size() - start - body;
    char tmp[20];  // tag (<= 5 bytes for 32-bit field numbers) + length (<= 10)
    std::memcpy(tmp, &buf_[start + body], header);
    std::memmove(&buf_[start + header], &buf_[start], body);
    std::memcpy(&buf_[start], tmp, header);
  }

  void Reserve(size_t n) { buf_.reserve(n); }
  size_t size() const { return buf_.size(); }
  const std::string& data() const { return buf_; }
  std::string Take() { return std::move(buf_); }

 private:
  std::string buf_;
};

}  // namespace fathom
