#include "dump/dump_scanner.h"

#include <cstring>

#ifdef __SSE2__
#include <emmintrin.h>
#endif

namespace fathom {

namespace {

// How many leading bytes of a "value" the scanner guarantees undecoded-free
// (see DumpRecord::value); the reader never names a string by more.
constexpr size_t kValueBytes = 64;
constexpr int kMaxDepth = 16;

// The hot helpers are forced inline: left to -O2 (and LTO), the compiler
// made them calls, which cost a third of the scan.
#define FATHOM_SCAN_INLINE inline __attribute__((always_inline))

FATHOM_SCAN_INLINE bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
FATHOM_SCAN_INLINE bool IsDigit(char c) { return c >= '0' && c <= '9'; }

// key == literal, with the length known at compile time (an inline
// compare, where string_view's == calls memcmp).
template <size_t N>
FATHOM_SCAN_INLINE bool KeyIs(std::string_view key, const char (&lit)[N]) {
  return __builtin_memcmp(key.data(), lit, N - 1) == 0;
}

const char* SkipValue(const char* p, const char* end, int depth);

class Scanner {
 public:
  Scanner(const char* p, const char* end) : p_(p), end_(end) {}

  // dump_all writes ", " between fields and nothing elsewhere: one test
  // for the common case.
  FATHOM_SCAN_INLINE void SkipSpace() {
    while (p_ < end_ && IsSpace(*p_)) p_++;
  }
  FATHOM_SCAN_INLINE bool Eat(char c) {
    if (p_ < end_ && *p_ == c) {
      p_++;
      return true;
    }
    return false;
  }
  bool AtEnd() const { return p_ >= end_; }
  const char* position() const { return p_; }
  FATHOM_SCAN_INLINE char Peek() const { return p_ < end_ ? *p_ : '\0'; }

  // A string after its opening quote. *escape_at: offset of the first
  // backslash (npos: none). Gives up on control bytes, bytes >= 0x80 (UTF-8
  // is the DOM parser's to validate) and \u escapes.
  FATHOM_SCAN_INLINE bool String(std::string_view* out, size_t* escape_at) {
    const char* begin = p_;
    *escape_at = std::string_view::npos;
    for (;;) {
#ifdef __SSE2__
      // 16 bytes at a time while none is special: a quote, a backslash, or
      // (one signed compare) a control byte or a byte >= 0x80. Never reads
      // past end_: the tail goes byte by byte.
      while (end_ - p_ >= 16) {
        __m128i v = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p_));
        __m128i special = _mm_or_si128(_mm_or_si128(_mm_cmpeq_epi8(v, _mm_set1_epi8('"')),
                                                     _mm_cmpeq_epi8(v, _mm_set1_epi8('\\'))),
                                        _mm_cmplt_epi8(v, _mm_set1_epi8(0x20)));
        int mask = _mm_movemask_epi8(special);
        if (mask == 0) {
          p_ += 16;
          continue;
        }
        p_ += __builtin_ctz(static_cast<unsigned>(mask));
        break;
      }
#endif
      if (p_ >= end_) return false;
      unsigned char c = static_cast<unsigned char>(*p_);
      if (c == '"') {
        *out = std::string_view(begin, static_cast<size_t>(p_ - begin));
        p_++;
        return true;
      }
      if (c < 0x20 || c >= 0x80) return false;
      if (c == '\\') {
        if (*escape_at == std::string_view::npos) *escape_at = static_cast<size_t>(p_ - begin);
        if (end_ - p_ < 2) return false;
        char e = p_[1];
        if (!(e == '"' || e == '\\' || e == '/' || e == 'b' || e == 'f' || e == 'n' || e == 'r' || e == 't'))
          return false;  // \u (surrogates to check) or not an escape at all
        p_ += 2;
        continue;
      }
      p_++;
    }
  }

  // A JSON number; *out set when it is a plain non-negative integer that
  // fits 64 bits (*is_uint). Fractions and exponents give up: the DOM
  // parser's range rules decide them.
  FATHOM_SCAN_INLINE bool Number(uint64_t* out, bool* is_uint) {
    *is_uint = false;
    bool negative = Eat('-');
    if (p_ >= end_ || !IsDigit(*p_)) return false;
    const char* digits = p_;
    if (*p_ == '0') {
      p_++;
    } else {
      while (p_ < end_ && IsDigit(*p_)) p_++;
    }
    size_t n = static_cast<size_t>(p_ - digits);
    if (p_ < end_ && (*p_ == '.' || *p_ == 'e' || *p_ == 'E')) return false;
    if (n > 19) return false;  // maybe beyond 64 bits: the DOM parser's rules
    uint64_t v = 0;
    for (size_t i = 0; i < n; i++) v = v * 10 + static_cast<uint64_t>(digits[i] - '0');
    if (!negative) {
      *out = v;
      *is_uint = true;
    }
    return true;
  }

  FATHOM_SCAN_INLINE bool Literal(const char* word, size_t n) {
    if (static_cast<size_t>(end_ - p_) < n || std::memcmp(p_, word, n) != 0) return false;
    p_ += n;
    return true;
  }

  // A scalar, inline: strings, literals, numbers (false for anything else).
  FATHOM_SCAN_INLINE bool SkipScalar() {
    switch (Peek()) {
      case '"': {
        p_++;
        std::string_view s;
        size_t esc;
        return String(&s, &esc);
      }
      case 't': return Literal("true", 4);
      case 'f': return Literal("false", 5);
      case 'n': return Literal("null", 4);
      default: {
        uint64_t v;
        bool u;
        return Number(&v, &u);
      }
    }
  }

  // Any value, validated and dropped. Scalars and objects of scalars (the
  // "flags" of every record) inline; anything nested deeper out of line,
  // since it recurses (keeping the scanner's position in a register in the
  // inlined rest).
  FATHOM_SCAN_INLINE bool Skip(int depth) {
    char c = Peek();
    if (c != '{' && c != '[') return SkipScalar();
    if (c == '{') {
      const char* start = p_;
      p_++;
      SkipSpace();
      if (Eat('}')) return true;
      for (;;) {
        std::string_view key;
        size_t esc;
        if (!Eat('"') || !String(&key, &esc)) return false;
        SkipSpace();
        if (!Eat(':')) return false;
        SkipSpace();
        c = Peek();
        if (c == '{' || c == '[') {  // nested: start over out of line
          p_ = start;
          break;
        }
        if (!SkipScalar()) return false;
        SkipSpace();
        if (Eat('}')) return true;
        if (!Eat(',')) return false;
        SkipSpace();
      }
    }
    const char* q = SkipValue(p_, end_, depth);
    if (q == nullptr) return false;
    p_ = q;
    return true;
  }

  // A string value that must be a string (else give up: the DOM parser
  // says which field is wrong), without escapes.
  FATHOM_SCAN_INLINE bool PlainString(std::string_view* out) {
    size_t esc;
    return Eat('"') && String(out, &esc) && esc == std::string_view::npos;
  }

  FATHOM_SCAN_INLINE bool Address(uint64_t* out) {
    std::string_view s;
    return PlainString(&s) && ParseDumpAddress(s, out);
  }

  FATHOM_SCAN_INLINE bool References(std::vector<uint64_t>* refs) {
    if (!Eat('[')) return false;
    SkipSpace();
    if (Eat(']')) return true;
    for (;;) {
      uint64_t a;
      if (!Address(&a)) return false;
      refs->push_back(a);
      SkipSpace();
      if (Eat(']')) return true;
      if (!Eat(',')) return false;
      SkipSpace();
    }
  }

  // A field kept only when it is a string ("name", "file"): another type
  // is skipped, as the DOM path does.
  FATHOM_SCAN_INLINE bool OptionalString(std::string_view* out, bool* present) {
    if (Peek() != '"') return Skip(1);
    if (!PlainString(out)) return false;
    if (present) *present = true;
    return true;
  }

  // "line", "generation": kept when a non-negative integer; a repeated key
  // of another type unsets it, as in the DOM path.
  FATHOM_SCAN_INLINE bool OptionalUint(uint64_t* out, bool* present) {
    if (Peek() == '-' || IsDigit(Peek())) return Number(out, present);
    *present = false;
    return Skip(1);
  }

  FATHOM_SCAN_INLINE bool Value(DumpRecord* r) {
    if (Peek() != '"') return Skip(1);
    p_++;
    std::string_view s;
    size_t esc;
    if (!String(&s, &esc)) return false;
    if (esc < kValueBytes) return false;  // an escape where the prefix is read: the DOM parser decodes it
    r->value = s;
    r->has_value = true;
    return true;
  }

  FATHOM_SCAN_INLINE bool Field(std::string_view key, DumpRecord* r, bool* seen_refs) {
    switch (key.size()) {
      case 4:
        if (KeyIs(key, "type")) return PlainString(&r->type);
        if (KeyIs(key, "root")) return PlainString(&r->root);
        if (KeyIs(key, "name")) return OptionalString(&r->name, nullptr);
        if (KeyIs(key, "file")) return OptionalString(&r->file, nullptr);
        if (KeyIs(key, "line")) return OptionalUint(&r->line, &r->has_line);
        break;
      case 5:
        if (KeyIs(key, "class")) return Address(&r->klass);
        if (KeyIs(key, "value")) return Value(r);
        break;
      case 6:
        if (KeyIs(key, "struct")) return OptionalString(&r->struct_name, nullptr);
        break;
      case 7:
        if (KeyIs(key, "address")) return Address(&r->address);
        if (KeyIs(key, "memsize")) {
          bool u;
          return Number(&r->memsize, &u) && u;
        }
        break;
      case 10:
        if (KeyIs(key, "references")) {
          if (*seen_refs) return false;  // which one counts is the DOM parser's call
          *seen_refs = true;
          r->has_refs = true;
          return References(&r->refs);
        }
        if (KeyIs(key, "generation")) return OptionalUint(&r->generation, &r->has_generation);
        break;
    }
    return Skip(1);
  }

   bool SkipAny(int depth) {
    if (p_ >= end_) return false;
    switch (*p_) {
      case '{': {
        if (depth >= kMaxDepth) return false;
        p_++;
        SkipSpace();
        if (Eat('}')) return true;
        for (;;) {
          if (!Eat('"')) return false;
          std::string_view key;
          size_t esc;
          if (!String(&key, &esc)) return false;
          SkipSpace();
          if (!Eat(':')) return false;
          SkipSpace();
          if (!Skip(depth + 1)) return false;
          SkipSpace();
          if (Eat('}')) return true;
          if (!Eat(',')) return false;
          SkipSpace();
        }
      }
      case '[': {
        if (depth >= kMaxDepth) return false;
        p_++;
        SkipSpace();
        if (Eat(']')) return true;
        for (;;) {
          if (!Skip(depth + 1)) return false;
          SkipSpace();
          if (Eat(']')) return true;
          if (!Eat(',')) return false;
          SkipSpace();
        }
      }
      default:
        return SkipScalar();
    }
  }

 private:
  const char* p_;
  const char* end_;
};

const char* SkipValue(const char* p, const char* end, int depth) {
  Scanner s(p, end);
  return s.SkipAny(depth) ? s.position() : nullptr;
}

}  // namespace

namespace {
// Hex digit values; 16 for anything else.
struct HexTable {
  uint8_t value[256];
  constexpr HexTable() : value() {
    for (int i = 0; i < 256; i++) value[i] = 16;
    for (int i = 0; i < 10; i++) value['0' + i] = static_cast<uint8_t>(i);
    for (int i = 0; i < 6; i++) value['a' + i] = value['A' + i] = static_cast<uint8_t>(10 + i);
  }
};
constexpr HexTable kHex;
}  // namespace

bool ParseDumpAddress(std::string_view s, uint64_t* out) {
  if (s.size() < 3 || s.size() > 18 || s[0] != '0' || (s[1] != 'x' && s[1] != 'X')) return false;
  uint64_t v = 0;
  unsigned bad = 0;
  for (size_t i = 2; i < s.size(); i++) {
    unsigned d = kHex.value[static_cast<unsigned char>(s[i])];
    bad |= d;  // 16 sets bit 4, which no digit has
    v = (v << 4) | (d & 15);
  }
  if (bad & 16) return false;
  *out = v;
  return v != 0;
}

bool ScanDumpLine(const char* data, size_t len, DumpRecord* r) {
  r->Clear();
  Scanner s(data, data + len);
  s.SkipSpace();
  if (!s.Eat('{')) return false;
  s.SkipSpace();
  bool seen_refs = false;
  if (!s.Eat('}')) {
    for (;;) {
      if (!s.Eat('"')) return false;
      std::string_view key;
      size_t esc;
      if (!s.String(&key, &esc) || esc != std::string_view::npos) return false;
      s.SkipSpace();
      if (!s.Eat(':')) return false;
      s.SkipSpace();
      if (!s.Field(key, r, &seen_refs)) return false;
      s.SkipSpace();
      if (s.Eat('}')) break;
      if (!s.Eat(',')) return false;
      s.SkipSpace();
    }
  }
  s.SkipSpace();
  return s.AtEnd();
}

}  // namespace fathom
