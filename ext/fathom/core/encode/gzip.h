// gzip helpers (zlib) for pprof files, which are stored gzipped.
#pragma once

#include <string>
#include <string_view>

namespace fathom {

// The comment every gzip member Fathom writes carries in its header
// (RFC 1952 FCOMMENT): how Fathom recognizes, before overwriting a file,
// that it wrote it (lib/fathom/files/atomic_file.rb reads it back).
inline constexpr char kGzipComment[] = "fathom";

// gzip (RFC 1952) with zlib; level is zlib's (-1 = default, 0..9); the
// header carries kGzipComment. Throws std::runtime_error on zlib failure
// (including a bad level).
std::string GzipCompress(std::string_view data, int level = 6);

}  // namespace fathom
