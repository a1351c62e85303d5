#include "base/utf8.h"

namespace fathom {
namespace {

constexpr char kReplacementChar[] = "\xEF\xBF\xBD";  // U+FFFD

// Length of the sequence that lead byte b starts and the allowed range of
// its second byte (Table 3-7); length 0 if b cannot start a sequence. The
// narrowed second-byte ranges rule out overlong forms (E0, F0), surrogates
// (ED) and code points past U+10FFFF (F4).
struct Lead {
  size_t length;
  unsigned char lo, hi;
};

Lead ClassifyLead(unsigned char b) {
  if (b < 0x80) return {1, 0, 0};
  if (b >= 0xC2 && b <= 0xDF) return {2, 0x80, 0xBF};
  if (b == 0xE0) return {3, 0xA0, 0xBF};
  if (b == 0xED) return {3, 0x80, 0x9F};
  if (b >= 0xE1 && b <= 0xEF) return {3, 0x80, 0xBF};
  if (b == 0xF0) return {4, 0x90, 0xBF};
  if (b >= 0xF1 && b <= 0xF3) return {4, 0x80, 0xBF};
  if (b == 0xF4) return {4, 0x80, 0x8F};
  return {0, 0, 0};  // 0x80..0xC1 (continuation / overlong lead) or 0xF5..0xFF
}

}  // namespace

Utf8Step NextUtf8(std::string_view s, size_t i) {
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  Lead lead = ClassifyLead(p[i]);
  if (lead.length == 1) return {1, true};
  if (lead.length == 0) return {1, false};
  // On the first bad or missing continuation byte, the bytes accepted so
  // far are one maximal ill-formed subpart; the bad byte is looked at
  // afresh by the next step (it may start a valid sequence).
  size_t k = 1;
  for (; k < lead.length && i + k < s.size(); k++) {
    unsigned char c = p[i + k];
    unsigned char lo = k == 1 ? lead.lo : 0x80, hi = k == 1 ? lead.hi : 0xBF;
    if (c < lo || c > hi) break;
  }
  return {k, k == lead.length};
}

bool IsValidUtf8(std::string_view s) {
  for (size_t i = 0; i < s.size();) {
    // ASCII runs are the common case: skip them a byte at a time cheaply.
    if (static_cast<unsigned char>(s[i]) < 0x80) {
      i++;
      continue;
    }
    Utf8Step step = NextUtf8(s, i);
    if (!step.valid) return false;
    i += step.length;
  }
  return true;
}

std::string ScrubUtf8(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    Utf8Step step = NextUtf8(s, i);
    if (step.valid)
      out.append(s.data() + i, step.length);
    else
      out.append(kReplacementChar);
    i += step.length;
  }
  return out;
}

std::string EscapeInvalidUtf8(std::string_view s) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(s.size());
  for (size_t i = 0; i < s.size();) {
    Utf8Step step = NextUtf8(s, i);
    if (step.valid) {
      out.append(s.data() + i, step.length);
    } else {
      for (size_t k = 0; k < step.length; k++) {
        auto b = static_cast<unsigned char>(s[i + k]);
        out += "\\x";
        out += kHex[b >> 4];
        out += kHex[b & 0xF];
      }
    }
    i += step.length;
  }
  return out;
}

}  // namespace fathom
