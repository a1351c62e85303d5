#include "firefox/json_writer.h"

#include <charconv>
#include <cmath>
#include <stdexcept>
#include <system_error>

#include "base/utf8.h"

namespace fathom {

namespace {
constexpr char kReplacementChar[] = "\xEF\xBF\xBD";  // U+FFFD in UTF-8
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
    // Ill-formed UTF-8 (base/utf8.h): one U+FFFD per maximal subpart, so
    // the output is strict JSON whatever the bytes.
    Utf8Step step = NextUtf8(s, i);
    if (step.valid)
      out->append(s.data() + i, step.length);
    else
      out->append(kReplacementChar);
    i += step.length;
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
