#include "retention/key_shape.h"

#include <cstdio>

namespace fathom {
namespace retention {

uint16_t KeyHash16(std::string_view bytes) {
  uint32_t h = 2166136261u;  // FNV-1a 32-bit offset basis and prime
  for (unsigned char c : bytes) {
    h ^= c;
    h *= 16777619u;
  }
  return static_cast<uint16_t>((h >> 16) ^ (h & 0xffffu));
}

std::string KeyShape(std::string_view bytes, bool symbol) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%s %zu byte%s #%04x", symbol ? ":…" : "\"…\"", bytes.size(),
                bytes.size() == 1 ? "" : "s", static_cast<unsigned>(KeyHash16(bytes)));
  return buf;
}

}  // namespace retention
}  // namespace fathom
