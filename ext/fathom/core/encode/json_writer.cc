#include "encode/json_writer.h"

#include <charconv>
#include <cmath>
#include <stdexcept>
#include <system_error>

namespace fathom {

namespace {

constexpr char kReplacementChar[] = "\xEF\xBF\xBD";  // U+FFFD in UTF-8

// Length of the well-formed UTF-8 sequence that starts with lead byte b and
// the allowed range of its second byte (Unicode Table 3-7); 0 if b cannot
// start a multi-byte sequence. The narrowed second-byte ranges are what rule
// out overlong forms (E0, F0), surrogates (ED) and code points past
// U+10FFFF (F4).
struct LeadInfo {
  int length;
  unsigned char lo, hi;
};

LeadInfo ClassifyLead(unsigned char b) {
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

void JsonWriter::AppendQuoted(std::string* out, std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  out->push_back('"');
  const auto* p = reinterpret_cast<const unsigned char*>(s.data());
  const size_t n = s.size();
  size_t i = 0;
  while (i < n) {
    // Copy the run of bytes that need no attention in one append.
    size_t run = i;
    while (run < n && p[run] >= 0x20 && p[run] < 0x80 && p[run] != '"' && p[run] != '\\') run++;
    if (run > i) {
      out->append(s.data() + i, run - i);
      i = run;
      if (i == n) break;
    }
    unsigned char b = p[i];
    if (b < 0x80) {  // '"', '\\' or a control character
      switch (b) {
        case '"': out->append("\\\""); break;
        case '\\': out->append("\\\\"); break;
        case '\b': out->append("\\b"); break;
        case '\f': out->append("\\f"); break;
        case '\n': out->append("\\n"); break;
        case '\r': out->append("\\r"); break;
        case '\t': out->append("\\t"); break;
        default: {
          char esc[6] = {'\\', 'u', '0', '0', kHex[b >> 4], kHex[b & 0xF]};
          out->append(esc, sizeof esc);
        }
      }
      i++;
      continue;
    }
    LeadInfo lead = ClassifyLead(b);
    if (lead.length == 0) {
      out->append(kReplacementChar);
      i++;
      continue;
    }
    // Check the continuation bytes; on the first bad or missing one, the
    // bytes accepted so far are one maximal ill-formed subpart -> one U+FFFD,
    // and the bad byte is looked at afresh (it may start a valid sequence).
    int k = 1;
    for (; k < lead.length; k++) {
      if (i + k >= n) break;
      unsigned char c = p[i + k];
      unsigned char lo = k == 1 ? lead.lo : 0x80, hi = k == 1 ? lead.hi : 0xBF;
      if (c < lo || c > hi) break;
    }
    if (k == lead.length) {
      out->append(s.data() + i, static_cast<size_t>(k));
    } else {
      out->append(kReplacementChar);
    }
    i += static_cast<size_t>(k);
  }
  out->push_back('"');
}

void JsonWriter::AppendDouble(std::string* out, double v) {
  if (!std::isfinite(v)) {
    out->append("null");
    return;
  }
  // Shortest round-trip form; 32 bytes hold any double (at most 24 chars).
  char buf[32];
  auto res = std::to_chars(buf, buf + sizeof buf, v);
  if (res.ec != std::errc()) throw std::logic_error("JsonWriter: to_chars failed for a double");
  out->append(buf, static_cast<size_t>(res.ptr - buf));
}

void JsonWriter::BeforeValue() {
  if (stack_.empty()) {
    if (wrote_root_) throw std::logic_error("JsonWriter: a second top-level value");
    wrote_root_ = true;
    return;
  }
  if (stack_.back() == Frame::kObject) {
    if (!key_pending_) throw std::logic_error("JsonWriter: a value inside an object needs a Key() first");
    key_pending_ = false;
    return;
  }
  if (has_items_.back()) out_->push_back(',');
  has_items_.back() = true;
}

void JsonWriter::Key(std::string_view key) {
  if (stack_.empty() || stack_.back() != Frame::kObject) throw std::logic_error("JsonWriter: Key() outside an object");
  if (key_pending_) throw std::logic_error("JsonWriter: Key() twice without a value");
  if (has_items_.back()) out_->push_back(',');
  has_items_.back() = true;
  AppendQuoted(out_, key);
  out_->push_back(':');
  key_pending_ = true;
}

void JsonWriter::BeginObject() {
  BeforeValue();
  out_->push_back('{');
  stack_.push_back(Frame::kObject);
  has_items_.push_back(false);
}

void JsonWriter::EndObject() {
  if (stack_.empty() || stack_.back() != Frame::kObject) throw std::logic_error("JsonWriter: EndObject() without BeginObject()");
  if (key_pending_) throw std::logic_error("JsonWriter: EndObject() after a Key() with no value");
  out_->push_back('}');
  stack_.pop_back();
  has_items_.pop_back();
}

void JsonWriter::BeginArray() {
  BeforeValue();
  out_->push_back('[');
  stack_.push_back(Frame::kArray);
  has_items_.push_back(false);
}

void JsonWriter::EndArray() {
  if (stack_.empty() || stack_.back() != Frame::kArray) throw std::logic_error("JsonWriter: EndArray() without BeginArray()");
  out_->push_back(']');
  stack_.pop_back();
  has_items_.pop_back();
}

void JsonWriter::String(std::string_view s) {
  BeforeValue();
  AppendQuoted(out_, s);
}

void JsonWriter::Int(int64_t v) {
  BeforeValue();
  char buf[24];
  auto res = std::to_chars(buf, buf + sizeof buf, v);
  out_->append(buf, static_cast<size_t>(res.ptr - buf));
}

void JsonWriter::Uint(uint64_t v) {
  BeforeValue();
  char buf[24];
  auto res = std::to_chars(buf, buf + sizeof buf, v);
  out_->append(buf, static_cast<size_t>(res.ptr - buf));
}

void JsonWriter::Double(double v) {
  BeforeValue();
  AppendDouble(out_, v);
}

void JsonWriter::Bool(bool v) {
  BeforeValue();
  out_->append(v ? "true" : "false");
}

void JsonWriter::Null() {
  BeforeValue();
  out_->append("null");
}

}  // namespace fathom
