// Reads an ObjectSpace.dump_all file (JSON lines, plain or gzip) into a
// DumpHeap, streaming: the file is read in 1 MiB blocks through zlib (which
// passes plain files through), each line read by a scanner for dump_all's
// shape (dump_scanner.h) or, for any line the scanner does not expect,
// simdjson's DOM parser (it validates the whole line, so a damaged line is
// an error, not a half-read record), and reduced to the few fields
// retention needs.
//
// Errors are DumpError with the 1-based line number: a non-JSON line, an
// unknown "type", a record without "address", a truncated last line, a gzip
// error, an empty file, no ROOT records. References to addresses that are
// not in the dump are not errors: the graph builder counts them.
#pragma once

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>

#include "dump/dump_heap.h"

namespace fathom {

class DumpError : public std::runtime_error {
 public:
  DumpError(uint64_t line, const std::string& message)
      : std::runtime_error(line ? "line " + std::to_string(line) + ": " + message : message), line_(line) {}
  uint64_t line() const { return line_; }  // 0: not about one line

 private:
  uint64_t line_;
};

struct DumpReadStats {
  uint64_t lines = 0;
  uint64_t objects = 0;
  uint64_t roots = 0;          // ROOT records
  uint64_t skipped = 0;        // records that are not heap objects (SHAPE on 3.3)
  uint64_t dom_lines = 0;      // lines the scanner left to the DOM parser
  uint64_t file_bytes = 0;     // compressed size when gzipped
  uint64_t input_bytes = 0;    // uncompressed bytes parsed
  bool gzipped = false;
};

struct DumpReadOptions {
  // Called about every 16 MiB of input with (uncompressed bytes so far).
  std::function<void(uint64_t bytes)> progress;
  // A line longer than this is refused (one JSON document is held whole).
  size_t max_line_bytes = size_t{256} << 20;
  // Every line to simdjson's DOM parser, none to the scanner (comparison).
  bool dom_parser_only = false;
  // Strings are named by at most this many bytes of their value; 0: strings
  // get no name at all (their contents stay out of the profile; what
  // AnalyzeDump does unless DumpAnalysisOptions::string_contents).
  size_t string_prefix_bytes = 16;
};

// Throws DumpError for bad input, std::bad_alloc when memory runs out.
DumpHeap ReadDump(const std::string& path, const DumpReadOptions& options = {}, DumpReadStats* stats = nullptr);

// The same on bytes already in memory (tests, fuzzing); `data` need not be
// padded. gzip is not recognised here.
DumpHeap ReadDumpBytes(const char* data, size_t size, const DumpReadOptions& options = {},
                       DumpReadStats* stats = nullptr);

}  // namespace fathom
