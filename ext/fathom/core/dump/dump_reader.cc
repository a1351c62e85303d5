#include "dump/dump_reader.h"

#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <simdjson.h>
#include <sys/stat.h>
#include <unordered_map>

namespace fathom {

namespace {

constexpr size_t kBlock = size_t{1} << 20;
constexpr uint64_t kProgressEvery = uint64_t{16} << 20;

// "0x7f3a..." -> value; false when not a hex address.
bool ParseAddress(std::string_view s, uint64_t* out) {
  if (s.size() < 3 || s.size() > 18 || s[0] != '0' || (s[1] != 'x' && s[1] != 'X')) return false;
  uint64_t v = 0;
  for (size_t i = 2; i < s.size(); i++) {
    char c = s[i];
    unsigned d;
    if (c >= '0' && c <= '9') d = c - '0';
    else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
    else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
    else return false;
    v = (v << 4) | d;
  }
  *out = v;
  return v != 0;
}

std::string Quote(std::string_view s, size_t max) {
  std::string out;
  for (char c : s.substr(0, 40)) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) out += '?';
    else out += c;
  }
  if (s.size() > max) out += "...";
  return out;
}

// Turns JSON lines into DumpHeap arrays.
class LineParser {
 public:
  LineParser(const DumpReadOptions& options, DumpReadStats* stats) : options_(options), stats_(stats) {
    heap_.ref_begin.push_back(0);
  }

  // data[0..len) is one line without its newline; data + len +
  // SIMDJSON_PADDING must be readable (simdjson reads ahead).
  void Line(const char* data, size_t len, uint64_t line, bool last_unterminated) {
    stats_->lines = line;
    while (len > 0 && (data[len - 1] == '\r' || data[len - 1] == ' ')) len--;
    if (len == 0) return;  // blank lines carry nothing; dump_all writes none
    simdjson::dom::element doc;
    auto error = parser_.parse(reinterpret_cast<const uint8_t*>(data), len, false).get(doc);
    if (error) {
      if (last_unterminated) throw DumpError(line, "truncated last line (no newline and not complete JSON)");
      throw DumpError(line, std::string("not a JSON line: ") + simdjson::error_message(error) + " (\"" +
                                Quote(std::string_view(data, len), 40) + "\")");
    }
    simdjson::dom::object obj;
    if (doc.get_object().get(obj)) throw DumpError(line, "not a JSON object");
    Record(obj, line);
  }

  DumpHeap Finish() {
    if (heap_.size() == 0 && heap_.roots.empty() && stats_->skipped == 0) throw DumpError(0, "empty file: no records");
    if (heap_.roots.empty()) throw DumpError(0, "no ROOT records: not an ObjectSpace.dump_all file (ObjectSpace.dump of one object has none)");
    if (!heap_.has_sites) heap_.site.clear(), heap_.site.shrink_to_fit();
    if (!heap_.has_generations) heap_.generation.clear(), heap_.generation.shrink_to_fit();
    return std::move(heap_);
  }

 private:
  static std::string_view Str(simdjson::dom::element e, uint64_t line, const char* key) {
    std::string_view s;
    if (e.get_string().get(s)) throw DumpError(line, std::string("\"") + key + "\" is not a string");
    return s;
  }

  static uint64_t Address(simdjson::dom::element e, uint64_t line, const char* key) {
    uint64_t a;
    if (!ParseAddress(Str(e, line, key), &a)) throw DumpError(line, std::string("\"") + key + "\" is not an address");
    return a;
  }

  void Record(simdjson::dom::object obj, uint64_t line) {
    std::string_view type_name, root, name, value, file;
    uint64_t address = 0, klass = 0, memsize = 0, line_no = 0, generation = 0;
    bool has_line = false, has_generation = false, has_value = false;
    simdjson::dom::array references;
    bool has_refs = false;
    for (auto field : obj) {
      std::string_view k = field.key;
      auto v = field.value;
      if (k == "type") type_name = Str(v, line, "type");
      else if (k == "address") address = Address(v, line, "address");
      else if (k == "class") klass = Address(v, line, "class");
      else if (k == "memsize") {
        if (v.get_uint64().get(memsize)) throw DumpError(line, "\"memsize\" is not a non-negative integer");
      } else if (k == "references") {
        if (v.get_array().get(references)) throw DumpError(line, "\"references\" is not an array");
        has_refs = true;
      } else if (k == "root") root = Str(v, line, "root");
      else if (k == "name") {
        // A module's name; other records use "name" too (a class's
        // method entry...): only strings are kept.
        if (v.is_string()) name = Str(v, line, "name");
      } else if (k == "value") {
        if (v.is_string()) value = Str(v, line, "value"), has_value = true;
      } else if (k == "file") {
        if (v.is_string()) file = Str(v, line, "file");
      } else if (k == "line") {
        has_line = !v.get_uint64().get(line_no);
      } else if (k == "generation") {
        has_generation = !v.get_uint64().get(generation);
      }
    }
    if (type_name.empty()) throw DumpError(line, "record without \"type\"");
    if (type_name == "ROOT") {
      if (root.empty()) throw DumpError(line, "ROOT record without \"root\"");
      stats_->roots++;
      auto& cat = Category(root);
      if (has_refs) {
        for (auto r : references) cat.refs.push_back(Address(r, line, "references"));
      }
      return;
    }
    if (type_name == "SHAPE") {  // 3.3+: object shapes, not heap objects
      stats_->skipped++;
      return;
    }
    DumpType type = DumpTypeFromName(type_name.data(), type_name.size());
    if (type == kDumpTypeUnknown) throw DumpError(line, "unknown type \"" + Quote(type_name, 40) + "\"");
    if (address == 0) throw DumpError(line, "record without \"address\"");
    uint32_t name_id = 0;
    if ((type == kDumpClass || type == kDumpModule) && !name.empty()) {
      name_id = heap_.names.Intern(name);
    } else if (type == kDumpString && has_value) {
      name_id = StringName(value);
    }
    heap_.address.push_back(address);
    heap_.class_address.push_back(klass);
    heap_.memsize.push_back(memsize > UINT32_MAX ? UINT32_MAX : static_cast<uint32_t>(memsize));
    heap_.type.push_back(type);
    heap_.name.push_back(name_id);
    if (has_refs) {
      for (auto r : references) heap_.refs.push_back(Address(r, line, "references"));
      if (heap_.refs.size() > UINT32_MAX) throw DumpError(line, "more than 2^32 references");
    }
    heap_.ref_begin.push_back(static_cast<uint32_t>(heap_.refs.size()));
    uint32_t site = 0;
    if (!file.empty() && has_line) {
      site_key_.assign(file.data(), file.size());
      site_key_ += ':';
      site_key_ += std::to_string(line_no);
      site = heap_.names.Intern(site_key_);
      if (!heap_.has_sites) heap_.site.assign(heap_.size() - 1, 0), heap_.has_sites = true;
    }
    if (heap_.has_sites) heap_.site.push_back(site);
    if (has_generation && !heap_.has_generations) {
      heap_.generation.assign(heap_.size() - 1, DumpHeap::kNoGeneration);
      heap_.has_generations = true;
    }
    if (heap_.has_generations)
      heap_.generation.push_back(has_generation && generation < UINT32_MAX ? static_cast<uint32_t>(generation)
                                                                           : DumpHeap::kNoGeneration);
    stats_->objects++;
    if (heap_.size() >= (size_t{1} << 31) - 1) throw DumpError(line, "more than 2^31 objects");
  }

  // `"prefix"`: strings named by the start of their value (printable ASCII
  // only, so that names stay few and readable; a string of other bytes is
  // named by its class alone).
  uint32_t StringName(std::string_view value) {
    size_t n = value.size() < options_.string_prefix_bytes ? value.size() : options_.string_prefix_bytes;
    for (size_t i = 0; i < n; i++) {
      unsigned char c = static_cast<unsigned char>(value[i]);
      if (c < 0x20 || c >= 0x7f) return 0;
    }
    std::string s = "\"";
    s.append(value.data(), n);
    s += value.size() > n ? "…\"" : "\"";
    return heap_.names.Intern(s);
  }

  DumpHeap::RootCategory& Category(std::string_view name) {
    for (auto& c : heap_.roots)
      if (c.name == name) return c;
    heap_.roots.push_back(DumpHeap::RootCategory{std::string(name), {}});
    return heap_.roots.back();
  }

  const DumpReadOptions& options_;
  DumpReadStats* stats_;
  simdjson::dom::parser parser_;
  DumpHeap heap_;
  std::string site_key_;
};

// Splits a stream of blocks into lines. `fill(dst, room)` returns bytes
// read (0 at the end).
template <typename Fill>
DumpHeap ReadLines(Fill&& fill, const DumpReadOptions& options, DumpReadStats* stats) {
  LineParser parser(options, stats);
  std::vector<char> buf(kBlock + simdjson::SIMDJSON_PADDING);
  size_t begin = 0, end = 0;
  uint64_t line = 0, next_progress = kProgressEvery;
  bool eof = false;
  while (!eof) {
    if (begin > 0) {  // keep the partial line at the front
      std::memmove(buf.data(), buf.data() + begin, end - begin);
      end -= begin;
      begin = 0;
    }
    if (buf.size() - simdjson::SIMDJSON_PADDING - end < kBlock / 2) {
      if (end > options.max_line_bytes) throw DumpError(line + 1, "line longer than " + std::to_string(options.max_line_bytes >> 20) + " MiB");
      buf.resize(buf.size() + buf.size() / 2);
    }
    size_t got = fill(buf.data() + end, buf.size() - simdjson::SIMDJSON_PADDING - end);
    if (got == 0) eof = true;
    size_t scan_from = end;
    end += got;
    stats->input_bytes += got;
    std::memset(buf.data() + end, 0, simdjson::SIMDJSON_PADDING);
    (void)scan_from;
    for (;;) {
      const char* nl = static_cast<const char*>(std::memchr(buf.data() + begin, '\n', end - begin));
      if (!nl) break;
      size_t len = static_cast<size_t>(nl - (buf.data() + begin));
      parser.Line(buf.data() + begin, len, ++line, false);
      begin += len + 1;
    }
    if (eof && end > begin) parser.Line(buf.data() + begin, end - begin, ++line, true), begin = end;
    if (options.progress && stats->input_bytes >= next_progress) {
      options.progress(stats->input_bytes);
      next_progress = stats->input_bytes + kProgressEvery;
    }
  }
  return parser.Finish();
}

struct GzCloser {
  void operator()(gzFile_s* f) const { gzclose(f); }
};

}  // namespace

DumpHeap ReadDump(const std::string& path, const DumpReadOptions& options, DumpReadStats* stats) {
  DumpReadStats local;
  if (!stats) stats = &local;
  *stats = DumpReadStats{};
  struct stat st;
  if (stat(path.c_str(), &st) != 0) throw DumpError(0, path + ": " + std::strerror(errno));
  if (!S_ISREG(st.st_mode)) throw DumpError(0, path + ": not a regular file");
  stats->file_bytes = static_cast<uint64_t>(st.st_size);
  if (st.st_size == 0) throw DumpError(0, "empty file");
  std::unique_ptr<gzFile_s, GzCloser> gz(gzopen(path.c_str(), "rb"));
  if (!gz) throw DumpError(0, path + ": " + std::strerror(errno ? errno : ENOMEM));
  gzbuffer(gz.get(), 256 * 1024);
  auto fill = [&](char* dst, size_t room) -> size_t {
    if (room > (1u << 30)) room = 1u << 30;
    int n = gzread(gz.get(), dst, static_cast<unsigned>(room));
    int errnum = Z_OK;
    const char* msg = gzerror(gz.get(), &errnum);
    // A truncated gzip stream reads what it can, then reports Z_BUF_ERROR.
    if (n < 0 || (errnum != Z_OK && errnum != Z_STREAM_END))
      throw DumpError(stats->lines + 1, std::string("gzip error: ") + (msg && *msg ? msg : "unreadable data"));
    return static_cast<size_t>(n);
  };
  DumpHeap heap = ReadLines(fill, options, stats);
  stats->gzipped = gzdirect(gz.get()) == 0;
  return heap;
}

DumpHeap ReadDumpBytes(const char* data, size_t size, const DumpReadOptions& options, DumpReadStats* stats) {
  DumpReadStats local;
  if (!stats) stats = &local;
  *stats = DumpReadStats{};
  stats->file_bytes = size;
  if (size == 0) throw DumpError(0, "empty file");
  size_t pos = 0;
  auto fill = [&](char* dst, size_t room) -> size_t {
    size_t n = size - pos < room ? size - pos : room;
    std::memcpy(dst, data + pos, n);
    pos += n;
    return n;
  };
  return ReadLines(fill, options, stats);
}

}  // namespace fathom
