// UTF-8 well-formedness, for the strings Fathom writes into profiles.
//
// Names come from the profiled program: class names, method names, file
// paths, hash keys. Ruby strings may hold any bytes (a binary hash key, a
// Shift_JIS file name), but a pprof string table is a proto3 `string` (valid
// UTF-8 by definition: Ruby's protobuf decoders reject anything else, and
// Fathom's own reader could not match such a name) and JSON must be valid
// UTF-8. So every string is checked on its way into a profile, and the rare
// ill-formed one is repaired there, in one place.
//
// Well-formed means Unicode's Table 3-7: no overlong forms, no surrogates,
// nothing past U+10FFFF. Ill-formed input is cut into "maximal subparts"
// (Unicode's recommended practice, also what Ruby's String#scrub and the
// WHATWG decoder do): each becomes one replacement.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace fathom {

// At s[i] (i < s.size()): the length of the well-formed sequence starting
// there (1 for ASCII), and whether it is well formed. When it is not,
// length is that of the maximal ill-formed subpart (at least 1).
struct Utf8Step {
  size_t length;
  bool valid;
};
Utf8Step NextUtf8(std::string_view s, size_t i);

bool IsValidUtf8(std::string_view s);

// s with each maximal ill-formed subpart replaced by U+FFFD.
std::string ScrubUtf8(std::string_view s);

// s with each byte of an ill-formed subpart written as "\xNN" (Ruby's
// String#inspect style), for names where the bytes themselves matter, such
// as a binary hash key.
std::string EscapeInvalidUtf8(std::string_view s);

}  // namespace fathom
