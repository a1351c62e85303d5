// The fast path of the heap-dump reader: a scanner for the one shape of line
// ObjectSpace.dump_all writes (a flat JSON object of ASCII strings, plain
// integers, booleans, a "flags" object and a "references" array of address
// strings), which extracts the few fields retention needs in one pass.
//
// It validates what it reads (JSON's grammar: strings without control
// bytes, number syntax, literals, nesting, nothing after the object), but
// it gives up (returns false) on anything it does not expect rather than
// decide: a byte >= 0x80 (UTF-8 to validate), a \u escape, an escape in a
// key or in a kept string, a fraction or exponent, a kept field with an
// unexpected type, a repeated "references", deep nesting. The reader then
// hands the line to simdjson's DOM parser, which gives the same record or
// the error with its reason. So a line the scanner accepts is valid JSON
// and yields what the DOM parser would, and a damaged line always reaches
// the DOM parser's full validation.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace fathom {

// The fields of one line that retention needs. The views point into the
// line (or the DOM parser's buffer) and live until the next line.
struct DumpRecord {
  std::string_view type, root, name, value, file;
  // A T_DATA's type name ("struct"): the reader keeps only the few it
  // needs to tell Ruby 3.4's vm root apart (dump_heap.h).
  std::string_view struct_name;
  uint64_t address = 0, klass = 0, memsize = 0, line = 0, generation = 0;
  bool has_line = false, has_generation = false, has_value = false, has_refs = false;
  // `value` is only read for its first 64 bytes and whether it is longer
  // (string_prefix_bytes <= 64): the scanner may leave an escape after
  // those bytes undecoded.
  std::vector<uint64_t> refs;

  void Clear() {
    type = root = name = value = file = struct_name = std::string_view();
    address = klass = memsize = line = generation = 0;
    has_line = has_generation = has_value = has_refs = false;
    refs.clear();
  }
};

// "0x7f3a..." -> value; false when not a non-zero hex address of at most 16 digits.
bool ParseDumpAddress(std::string_view s, uint64_t* out);

// Scans data[0..len) (one line, no newline) into *record; reads nothing
// outside it. false: not decided here, hand the line to the DOM parser.
bool ScanDumpLine(const char* data, size_t len, DumpRecord* record);

}  // namespace fathom
