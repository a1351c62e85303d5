// JsonWriter: a small streaming JSON writer, appending compact JSON text
// (no whitespace) to one std::string. Pure C++17; no Ruby headers.
//
// Callers say what comes next (BeginObject, Key, String, ...) and the writer
// puts the commas and colons in. Misuse that would produce invalid JSON (a
// value where a key is due, a key inside an array, closing the wrong kind of
// container, a second top-level value) throws std::logic_error: these are
// programming errors, and they are cheap to catch here, where the output is
// made, rather than in a viewer that rejects the file.
//
// The text is always valid JSON and valid UTF-8, whatever the input:
//  - Strings: '"' and '\\' are escaped, control characters (U+0000..U+001F)
//    become \b \f \n \r \t or \u00XX; all other characters pass through as
//    UTF-8. Input that is not well-formed UTF-8 (stray continuation bytes,
//    truncated or overlong sequences, UTF-16 surrogates, code points past
//    U+10FFFF) is replaced by U+FFFD, one per maximal ill-formed subpart, as
//    Unicode (chapter 3, "U+FFFD Substitution of Maximal Subparts") and the
//    WHATWG decoder do. This matters: the Firefox Profiler decodes files with
//    a fatal UTF-8 decoder, so one bad byte in a Ruby string (a binary
//    method name, a path in a foreign encoding) would make the whole profile
//    unloadable.
//  - Doubles: the shortest text that reads back as the same double
//    (std::to_chars), e.g. 0.1, 1.5, 1e+21; NaN and infinities, which JSON
//    cannot express, are written as null.
//  - Integers: int64 / uint64 exactly.
// Output depends only on the calls made, never on the locale, so the same
// calls give the same bytes.
//
// Not thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace fathom {

class JsonWriter {
 public:
  // Appends to out, which must outlive the writer. Whatever out already
  // holds is kept (so a caller can reserve() it first).
  explicit JsonWriter(std::string* out) : out_(out) {}

  void BeginObject();
  void EndObject();
  void BeginArray();
  void EndArray();
  // The next member's name; must be followed by exactly one value.
  void Key(std::string_view key);

  void String(std::string_view s);
  void Int(int64_t v);
  void Uint(uint64_t v);
  void Double(double v);  // NaN / ±Inf are written as null
  void Bool(bool v);
  void Null();

  // Key + value in one call, for the common case.
  void KeyString(std::string_view key, std::string_view s) { Key(key), String(s); }
  void KeyInt(std::string_view key, int64_t v) { Key(key), Int(v); }
  void KeyDouble(std::string_view key, double v) { Key(key), Double(v); }
  void KeyBool(std::string_view key, bool v) { Key(key), Bool(v); }
  void KeyNull(std::string_view key) { Key(key), Null(); }

  // True once one complete top-level value has been written.
  bool complete() const { return stack_.empty() && wrote_root_; }

  // Appends s to out as a JSON string literal (quotes included), escaped and
  // with ill-formed UTF-8 replaced as described above.
  static void AppendQuoted(std::string* out, std::string_view s);
  // Appends the JSON text for v: shortest round-trip form, or null.
  static void AppendDouble(std::string* out, double v);

 private:
  enum class Frame : uint8_t { kObject, kArray };

  // Called before every value (and Begin*): checks that a value is allowed
  // here and writes the separating comma if needed.
  void BeforeValue();

  std::string* out_;
  std::vector<Frame> stack_;
  // Whether the innermost container already has a member/element (so the
  // next one needs a comma). Parallel to stack_.
  std::vector<bool> has_items_;
  bool key_pending_ = false;  // inside an object, after Key(), before its value
  bool wrote_root_ = false;
};

}  // namespace fathom
