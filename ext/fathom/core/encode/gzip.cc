#include "encode/gzip.h"

#define ZLIB_CONST  // next_in becomes a pointer to const: no casts needed
#include <zlib.h>

#include <algorithm>
#include <climits>
#include <stdexcept>

namespace fathom {
namespace {

// zlib counts in uInt (32 bits), so inputs and outputs over 4 GiB are fed
// through in slices of at most this many bytes.
constexpr size_t kMaxSlice = UINT_MAX;

[[noreturn]] void Fail(const char* what, int rc, const z_stream& zs) {
  std::string msg = std::string("gzip: ") + what + " failed (zlib error " + std::to_string(rc);
  if (zs.msg != nullptr) msg += std::string(": ") + zs.msg;
  throw std::runtime_error(msg + ")");
}

// Makes room after `pos` in `out` and points the stream's output there.
void PrepareOutput(z_stream& zs, std::string& out, size_t pos) {
  if (pos == out.size()) out.resize(std::max<size_t>(out.size() * 2, 4096));
  zs.next_out = reinterpret_cast<Bytef*>(&out[pos]);
  zs.avail_out = static_cast<uInt>(std::min(out.size() - pos, kMaxSlice));
}

// Hands the stream the next slice of input once it has used up the last one.
void FeedInput(z_stream& zs, std::string_view data, size_t& fed) {
  if (zs.avail_in != 0 || fed == data.size()) return;
  size_t n = std::min(data.size() - fed, kMaxSlice);
  zs.next_in = reinterpret_cast<const Bytef*>(data.data() + fed);
  zs.avail_in = static_cast<uInt>(n);
  fed += n;
}

}  // namespace

std::string GzipCompress(std::string_view data, int level) {
  z_stream zs{};
  // windowBits 15 + 16: the largest window, with a gzip header and trailer.
  int rc = deflateInit2(&zs, level, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY);
  if (rc != Z_OK) Fail("deflateInit2", rc, zs);
  struct End {
    z_stream& zs;
    ~End() { deflateEnd(&zs); }
  } end{zs};
  gz_header header{};
  header.os = 3;  // Unix, as gzip(1) writes
  header.comment = reinterpret_cast<Bytef*>(const_cast<char*>(kGzipComment));
  rc = deflateSetHeader(&zs, &header);
  if (rc != Z_OK) Fail("deflateSetHeader", rc, zs);

  std::string out;
  // deflateBound is exact enough that one pass usually suffices.
  out.resize(deflateBound(&zs, static_cast<uLong>(data.size())));
  size_t fed = 0, pos = 0;
  do {
    FeedInput(zs, data, fed);
    PrepareOutput(zs, out, pos);
    uInt avail = zs.avail_out;
    rc = deflate(&zs, fed == data.size() ? Z_FINISH : Z_NO_FLUSH);
    if (rc != Z_OK && rc != Z_STREAM_END && rc != Z_BUF_ERROR) Fail("deflate", rc, zs);
    pos += avail - zs.avail_out;
  } while (rc != Z_STREAM_END);
  out.resize(pos);
  return out;
}

}  // namespace fathom
