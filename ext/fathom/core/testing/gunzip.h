// GzipDecompress, for tests that read back what the core wrote: Fathom
// itself only writes gzip (Ruby's Zlib reads profiles on the Ruby side).
#pragma once

#define ZLIB_CONST
#include <zlib.h>

#include <algorithm>
#include <climits>
#include <stdexcept>
#include <string>
#include <string_view>

namespace fathom {

// Accepts gzip (one or more concatenated members) or a raw zlib stream.
// Throws std::runtime_error on corrupt or truncated input.
inline std::string GzipDecompress(std::string_view data) {
  z_stream zs{};
  // windowBits 15 + 32: detect a gzip or zlib header automatically.
  if (inflateInit2(&zs, 15 + 32) != Z_OK) throw std::runtime_error("gzip: inflateInit2 failed");
  struct End {
    z_stream& zs;
    ~End() { inflateEnd(&zs); }
  } end{zs};
  std::string out(std::max<size_t>(data.size() * 4, 4096), '\0');
  size_t fed = 0, pos = 0;
  for (;;) {
    if (zs.avail_in == 0 && fed < data.size()) {
      size_t n = std::min<size_t>(data.size() - fed, UINT_MAX);
      zs.next_in = reinterpret_cast<const Bytef*>(data.data() + fed);
      zs.avail_in = static_cast<uInt>(n);
      fed += n;
    }
    if (pos == out.size()) out.resize(out.size() * 2);
    zs.next_out = reinterpret_cast<Bytef*>(&out[pos]);
    zs.avail_out = static_cast<uInt>(std::min<size_t>(out.size() - pos, UINT_MAX));
    uInt avail = zs.avail_out;
    int rc = inflate(&zs, Z_NO_FLUSH);
    pos += avail - zs.avail_out;
    bool input_left = zs.avail_in != 0 || fed != data.size();
    if (rc == Z_STREAM_END) {
      if (!input_left) break;
      // gzip allows concatenated members (as `cat a.gz b.gz` makes).
      if (inflateReset(&zs) != Z_OK) throw std::runtime_error("gzip: inflateReset failed");
      continue;
    }
    if (rc == Z_OK) continue;
    // Z_BUF_ERROR: no progress possible. With input left (or a full output
    // buffer) the next turn makes room; otherwise the stream ended early.
    if (rc == Z_BUF_ERROR && (input_left || zs.avail_out == 0)) continue;
    throw std::runtime_error(rc == Z_BUF_ERROR ? "gzip: truncated input" : "gzip: corrupt input");
  }
  out.resize(pos);
  return out;
}

}  // namespace fathom
