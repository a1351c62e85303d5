// A small, strict JSON parser (RFC 8259) for tests, so that checking the
// JSON the core writes needs no external tool.
//
// Strict on purpose, since it stands in for the viewers that will read our
// files (the Firefox Profiler uses JSON.parse after a *fatal* UTF-8 decode):
// the input must be well-formed UTF-8, strings may not hold raw control
// characters, numbers follow the JSON grammar (no leading zeros, no NaN),
// escapes must be valid (\uXXXX surrogates in pairs), objects may not repeat
// a key, and nothing but whitespace may follow the value. Violations throw
// json::ParseError with the byte offset.
//
// Objects keep their members in document order.
#pragma once

#include <charconv>
#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace fathom {
namespace test_util {
namespace json {

struct ParseError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

class Value {
 public:
  enum class Type { kNull, kBool, kNumber, kString, kArray, kObject };
  using Array = std::vector<Value>;
  using Object = std::vector<std::pair<std::string, Value>>;

  Value() = default;
  static Value Bool(bool b) {
    Value v;
    v.type_ = Type::kBool;
    v.bool_ = b;
    return v;
  }
  static Value Number(double d, bool is_int, int64_t i) {
    Value v;
    v.type_ = Type::kNumber;
    v.num_ = d;
    v.is_int_ = is_int;
    v.int_ = i;
    return v;
  }
  static Value String(std::string s) {
    Value v;
    v.type_ = Type::kString;
    v.str_ = std::move(s);
    return v;
  }
  static Value MakeArray(Array a) {
    Value v;
    v.type_ = Type::kArray;
    v.arr_ = std::make_shared<Array>(std::move(a));
    return v;
  }
  static Value MakeObject(Object o) {
    Value v;
    v.type_ = Type::kObject;
    v.obj_ = std::make_shared<Object>(std::move(o));
    return v;
  }

  Type type() const { return type_; }
  bool is_null() const { return type_ == Type::kNull; }
  bool is_bool() const { return type_ == Type::kBool; }
  bool is_number() const { return type_ == Type::kNumber; }
  // A number written without fraction or exponent that fits in int64.
  bool is_int() const { return type_ == Type::kNumber && is_int_; }
  bool is_string() const { return type_ == Type::kString; }
  bool is_array() const { return type_ == Type::kArray; }
  bool is_object() const { return type_ == Type::kObject; }

  bool as_bool() const { return Expect(Type::kBool), bool_; }
  double as_double() const { return Expect(Type::kNumber), num_; }
  int64_t as_int() const {
    if (!is_int()) throw std::logic_error("json: not an integer");
    return int_;
  }
  const std::string& as_string() const { return Expect(Type::kString), str_; }
  const Array& as_array() const { return Expect(Type::kArray), *arr_; }
  const Object& as_object() const { return Expect(Type::kObject), *obj_; }

  // Object member, or nullptr if absent (or if this is not an object).
  const Value* find(std::string_view key) const {
    if (type_ != Type::kObject) return nullptr;
    for (const auto& [k, v] : *obj_)
      if (k == key) return &v;
    return nullptr;
  }
  // Object member that must exist / array element that must exist.
  const Value& operator[](std::string_view key) const {
    const Value* v = find(key);
    if (v == nullptr) throw std::out_of_range("json: no member \"" + std::string(key) + "\"");
    return *v;
  }
  const Value& operator[](size_t i) const { return as_array().at(i); }
  size_t size() const { return type_ == Type::kArray ? arr_->size() : type_ == Type::kObject ? obj_->size() : 0; }

  // Mutation, for tests that break a valid document on purpose.
  Value& mut(std::string_view key) {
    Expect(Type::kObject);
    for (auto& [k, v] : *obj_)
      if (k == key) return v;
    throw std::out_of_range("json: no member \"" + std::string(key) + "\"");
  }
  Value& mut(size_t i) { return Expect(Type::kArray), arr_->at(i); }
  void erase(std::string_view key) {
    Expect(Type::kObject);
    for (auto it = obj_->begin(); it != obj_->end(); ++it)
      if (it->first == key) {
        obj_->erase(it);
        return;
      }
  }
  // Deep copy (arrays and objects are shared between copies otherwise).
  Value Clone() const {
    if (type_ == Type::kArray) {
      Array a;
      for (const Value& v : *arr_) a.push_back(v.Clone());
      return MakeArray(std::move(a));
    }
    if (type_ == Type::kObject) {
      Object o;
      for (const auto& [k, v] : *obj_) o.emplace_back(k, v.Clone());
      return MakeObject(std::move(o));
    }
    return *this;
  }

 private:
  void Expect(Type t) const {
    if (type_ != t) throw std::logic_error("json: value has another type");
  }

  Type type_ = Type::kNull;
  bool bool_ = false;
  double num_ = 0;
  bool is_int_ = false;
  int64_t int_ = 0;
  std::string str_;
  std::shared_ptr<Array> arr_;
  std::shared_ptr<Object> obj_;
};

namespace detail {

class Parser {
 public:
  explicit Parser(std::string_view text) : s_(text) {}

  Value ParseDocument() {
    CheckUtf8();
    SkipWs();
    Value v = ParseValue(0);
    SkipWs();
    if (pos_ != s_.size()) Fail("trailing characters after the value");
    return v;
  }

 private:
  [[noreturn]] void Fail(const std::string& why) const {
    throw ParseError("json: " + why + " at byte " + std::to_string(pos_));
  }

  // The whole input must be well-formed UTF-8 (Unicode Table 3-7).
  void CheckUtf8() {
    const auto* p = reinterpret_cast<const unsigned char*>(s_.data());
    size_t n = s_.size();
    for (size_t i = 0; i < n;) {
      unsigned char b = p[i];
      int len;
      unsigned char lo = 0x80, hi = 0xBF;
      if (b < 0x80) {
        i++;
        continue;
      } else if (b >= 0xC2 && b <= 0xDF) {
        len = 2;
      } else if (b == 0xE0) {
        len = 3, lo = 0xA0;
      } else if (b == 0xED) {
        len = 3, hi = 0x9F;
      } else if (b >= 0xE1 && b <= 0xEF) {
        len = 3;
      } else if (b == 0xF0) {
        len = 4, lo = 0x90;
      } else if (b >= 0xF1 && b <= 0xF3) {
        len = 4;
      } else if (b == 0xF4) {
        len = 4, hi = 0x8F;
      } else {
        pos_ = i;
        Fail("invalid UTF-8 lead byte");
      }
      for (int k = 1; k < len; k++) {
        unsigned char c = i + k < n ? p[i + k] : 0;
        if (c < (k == 1 ? lo : 0x80) || c > (k == 1 ? hi : 0xBF)) {
          pos_ = i;
          Fail("ill-formed UTF-8 sequence");
        }
      }
      i += static_cast<size_t>(len);
    }
  }

  void SkipWs() {
    while (pos_ < s_.size() && (s_[pos_] == ' ' || s_[pos_] == '\t' || s_[pos_] == '\n' || s_[pos_] == '\r')) pos_++;
  }

  bool Consume(char c) {
    if (pos_ < s_.size() && s_[pos_] == c) {
      pos_++;
      return true;
    }
    return false;
  }

  void ExpectLiteral(std::string_view lit) {
    if (s_.substr(pos_, lit.size()) != lit) Fail("unexpected token");
    pos_ += lit.size();
  }

  Value ParseValue(int depth) {
    if (depth > 200) Fail("nesting too deep");
    if (pos_ >= s_.size()) Fail("unexpected end of input");
    char c = s_[pos_];
    switch (c) {
      case '{': return ParseObject(depth);
      case '[': return ParseArray(depth);
      case '"': return Value::String(ParseString());
      case 't': ExpectLiteral("true"); return Value::Bool(true);
      case 'f': ExpectLiteral("false"); return Value::Bool(false);
      case 'n': ExpectLiteral("null"); return Value();
      default:
        if (c == '-' || (c >= '0' && c <= '9')) return ParseNumber();
        Fail(std::string("unexpected character '") + c + "'");
    }
  }

  Value ParseObject(int depth) {
    pos_++;  // '{'
    Value::Object members;
    std::set<std::string> seen;
    SkipWs();
    if (Consume('}')) return Value::MakeObject(std::move(members));
    for (;;) {
      SkipWs();
      if (pos_ >= s_.size() || s_[pos_] != '"') Fail("expected a member name");
      std::string key = ParseString();
      if (!seen.insert(key).second) Fail("repeated member name \"" + key + "\"");
      SkipWs();
      if (!Consume(':')) Fail("expected ':'");
      SkipWs();
      Value v = ParseValue(depth + 1);
      members.emplace_back(std::move(key), std::move(v));
      SkipWs();
      if (Consume('}')) return Value::MakeObject(std::move(members));
      if (!Consume(',')) Fail("expected ',' or '}'");
    }
  }

  Value ParseArray(int depth) {
    pos_++;  // '['
    Value::Array items;
    SkipWs();
    if (Consume(']')) return Value::MakeArray(std::move(items));
    for (;;) {
      SkipWs();
      items.push_back(ParseValue(depth + 1));
      SkipWs();
      if (Consume(']')) return Value::MakeArray(std::move(items));
      if (!Consume(',')) Fail("expected ',' or ']'");
    }
  }

  unsigned Hex4() {
    if (pos_ + 4 > s_.size()) Fail("truncated \\u escape");
    unsigned v = 0;
    for (int k = 0; k < 4; k++) {
      char c = s_[pos_++];
      v <<= 4;
      if (c >= '0' && c <= '9')
        v |= static_cast<unsigned>(c - '0');
      else if (c >= 'a' && c <= 'f')
        v |= static_cast<unsigned>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F')
        v |= static_cast<unsigned>(c - 'A' + 10);
      else
        Fail("bad hex digit in \\u escape");
    }
    return v;
  }

  static void AppendUtf8(std::string& out, unsigned cp) {
    if (cp < 0x80) {
      out += static_cast<char>(cp);
    } else if (cp < 0x800) {
      out += static_cast<char>(0xC0 | (cp >> 6));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else if (cp < 0x10000) {
      out += static_cast<char>(0xE0 | (cp >> 12));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    } else {
      out += static_cast<char>(0xF0 | (cp >> 18));
      out += static_cast<char>(0x80 | ((cp >> 12) & 0x3F));
      out += static_cast<char>(0x80 | ((cp >> 6) & 0x3F));
      out += static_cast<char>(0x80 | (cp & 0x3F));
    }
  }

  std::string ParseString() {
    pos_++;  // '"'
    std::string out;
    for (;;) {
      if (pos_ >= s_.size()) Fail("unterminated string");
      unsigned char c = static_cast<unsigned char>(s_[pos_]);
      if (c == '"') {
        pos_++;
        return out;
      }
      if (c < 0x20) Fail("raw control character in a string");
      if (c != '\\') {
        out += static_cast<char>(c);
        pos_++;
        continue;
      }
      pos_++;
      if (pos_ >= s_.size()) Fail("truncated escape");
      char e = s_[pos_++];
      switch (e) {
        case '"': out += '"'; break;
        case '\\': out += '\\'; break;
        case '/': out += '/'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'u': {
          unsigned cp = Hex4();
          if (cp >= 0xDC00 && cp <= 0xDFFF) Fail("lone low surrogate escape");
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            if (s_.substr(pos_, 2) != "\\u") Fail("high surrogate escape without a low one");
            pos_ += 2;
            unsigned lo = Hex4();
            if (lo < 0xDC00 || lo > 0xDFFF) Fail("high surrogate escape without a low one");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          }
          AppendUtf8(out, cp);
          break;
        }
        default: Fail(std::string("bad escape \\") + e);
      }
    }
  }

  Value ParseNumber() {
    size_t start = pos_;
    bool is_int = true;
    Consume('-');
    if (Consume('0')) {
      if (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') Fail("leading zero in a number");
    } else {
      if (pos_ >= s_.size() || s_[pos_] < '1' || s_[pos_] > '9') Fail("bad number");
      while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') pos_++;
    }
    if (Consume('.')) {
      is_int = false;
      if (pos_ >= s_.size() || s_[pos_] < '0' || s_[pos_] > '9') Fail("digit expected after '.'");
      while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') pos_++;
    }
    if (pos_ < s_.size() && (s_[pos_] == 'e' || s_[pos_] == 'E')) {
      is_int = false;
      pos_++;
      if (!Consume('+')) Consume('-');
      if (pos_ >= s_.size() || s_[pos_] < '0' || s_[pos_] > '9') Fail("digit expected in exponent");
      while (pos_ < s_.size() && s_[pos_] >= '0' && s_[pos_] <= '9') pos_++;
    }
    std::string_view tok = s_.substr(start, pos_ - start);
    double d = 0;
    auto r = std::from_chars(tok.data(), tok.data() + tok.size(), d);
    if (r.ec != std::errc() || r.ptr != tok.data() + tok.size()) Fail("number out of range");
    int64_t i = 0;
    if (is_int) {
      auto ri = std::from_chars(tok.data(), tok.data() + tok.size(), i);
      if (ri.ec != std::errc()) is_int = false;  // too big for int64
    }
    return Value::Number(d, is_int, i);
  }

  std::string_view s_;
  size_t pos_ = 0;
};

}  // namespace detail

inline Value Parse(std::string_view text) { return detail::Parser(text).ParseDocument(); }

}  // namespace json
}  // namespace test_util
}  // namespace fathom
