// firefox_format_check FILE: the Firefox Profiler format check of the core's
// tests (ext/fathom/core/testing/firefox_format_check.h, on the core's
// strict JSON parser) as a command, for the Ruby tests
// (test/support/firefox_format.rb builds and runs it). One validator, not
// one per language.
//
// FILE holds a processed profile as JSON, or gzipped JSON. Prints nothing
// and exits 0 when it is valid; else prints each problem on a line
// ("threads[1].stackTable.prefix[3]: 7 is not < 3 (its own index)") and
// exits 1. Exit 2: the file cannot be read or is not JSON.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "testing/firefox_format_check.h"
#include "testing/gunzip.h"

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: firefox_format_check FILE\n";
    return 2;
  }
  std::ifstream in(argv[1], std::ios::binary);
  if (!in) {
    std::cerr << argv[1] << ": cannot be read\n";
    return 2;
  }
  std::stringstream buffer;
  buffer << in.rdbuf();
  std::string text = buffer.str();
  try {
    if (text.size() >= 2 && static_cast<unsigned char>(text[0]) == 0x1f && static_cast<unsigned char>(text[1]) == 0x8b)
      text = fathom::GzipDecompress(text);
    fathom::test_util::json::Value profile = fathom::test_util::json::Parse(text);
    std::string errors = fathom::test_util::FirefoxFormatErrors(profile);
    if (errors.empty()) return 0;
    std::cout << errors << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << argv[1] << ": " << e.what() << "\n";
    return 2;
  }
}
