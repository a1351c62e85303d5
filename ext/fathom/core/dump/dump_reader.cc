#include "dump/dump_reader.h"

#include "dump/dump_scanner.h"

#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <memory>
#include <simdjson.h>
#include <sys/stat.h>
#include <stdexcept>

namespace fathom {

namespace {

constexpr size_t kBlock = size_t{1} << 20;
constexpr uint64_t kProgressEvery = uint64_t{16} << 20;

std::string Quote(std::string_view s, size_t max) {
  std::string out;
  for (char c : s.substr(0, 40)) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) out += '?';
    else out += c;
  }
  if (s.size() > max) out += "...";
  return out;
}

// Turns JSON lines into DumpHeap arrays: each line goes to the scanner
// (dump_scanner.h) and, when it gives up, to simdjson's DOM parser, which
// validates the whole line; both fill a DumpRecord that Record() reduces.
class LineParser {
 public:
  LineParser(const DumpReadOptions& options, DumpReadStats* stats) : options_(options), stats_(stats) {
    if (options_.string_prefix_bytes > 64) throw std::invalid_argument("string_prefix_bytes above 64");
    heap_.ref_begin.push_back(0);
    heap_.prefix_count.push_back(0);
  }

  // data[0..len) is one line without its newline; data + len +
  // SIMDJSON_PADDING must be readable (simdjson reads ahead).
  void Line(const char* data, size_t len, uint64_t line, bool last_unterminated) {
    stats_->lines = line;
    while (len > 0 && (data[len - 1] == '\r' || data[len - 1] == ' ')) len--;
    if (len == 0) return;  // blank lines carry nothing; dump_all writes none
    if (options_.dom_parser_only || !ScanDumpLine(data, len, &record_)) {
      DomLine(data, len, line, last_unterminated);
      stats_->dom_lines++;
    }
    Record(record_, line);
  }

  DumpHeap Finish() {
    if (heap_.size() == 0 && heap_.roots.empty() && stats_->skipped == 0) throw DumpError(0, "empty file: no records");
    if (heap_.roots.empty()) throw DumpError(0, "no ROOT records: not an ObjectSpace.dump_all file (ObjectSpace.dump of one object has none)");
    if (!heap_.has_sites) heap_.site.Free();
    if (!heap_.has_generations) heap_.generation.Free();
    return std::move(heap_);
  }

 private:
  void DomLine(const char* data, size_t len, uint64_t line, bool last_unterminated) {
    simdjson::dom::element doc;
    auto error = parser_.parse(reinterpret_cast<const uint8_t*>(data), len, false).get(doc);
    if (error) {
      if (last_unterminated) throw DumpError(line, "truncated last line (no newline and not complete JSON)");
      throw DumpError(line, std::string("not a JSON line: ") + simdjson::error_message(error) + " (\"" +
                                Quote(std::string_view(data, len), 40) + "\")");
    }
    simdjson::dom::object obj;
    if (doc.get_object().get(obj)) throw DumpError(line, "not a JSON object");
    DomRecord(obj, line, &record_);
  }

  static std::string_view Str(simdjson::dom::element e, uint64_t line, const char* key) {
    std::string_view s;
    if (e.get_string().get(s)) throw DumpError(line, std::string("\"") + key + "\" is not a string");
    return s;
  }

  static uint64_t Address(simdjson::dom::element e, uint64_t line, const char* key) {
    uint64_t a;
    if (!ParseDumpAddress(Str(e, line, key), &a)) throw DumpError(line, std::string("\"") + key + "\" is not an address");
    return a;
  }

  // The DOM path's reading of the fields; the scanner reads the same.
  static void DomRecord(simdjson::dom::object obj, uint64_t line, DumpRecord* r) {
    r->Clear();
    simdjson::dom::array references;
    for (auto field : obj) {
      std::string_view k = field.key;
      auto v = field.value;
      if (k == "type") r->type = Str(v, line, "type");
      else if (k == "address") r->address = Address(v, line, "address");
      else if (k == "class") r->klass = Address(v, line, "class");
      else if (k == "memsize") {
        if (v.get_uint64().get(r->memsize)) throw DumpError(line, "\"memsize\" is not a non-negative integer");
      } else if (k == "references") {
        if (v.get_array().get(references)) throw DumpError(line, "\"references\" is not an array");
        r->has_refs = true;
      } else if (k == "root") r->root = Str(v, line, "root");
      else if (k == "name") {
        // A module's name; other records use "name" too (a class's
        // method entry...): only strings are kept.
        if (v.is_string()) r->name = Str(v, line, "name");
      } else if (k == "value") {
        if (v.is_string()) r->value = Str(v, line, "value"), r->has_value = true;
      } else if (k == "file") {
        if (v.is_string()) r->file = Str(v, line, "file");
      } else if (k == "struct") {
        if (v.is_string()) r->struct_name = Str(v, line, "struct");
      } else if (k == "line") {
        r->has_line = !v.get_uint64().get(r->line);
      } else if (k == "generation") {
        r->has_generation = !v.get_uint64().get(r->generation);
      }
    }
    if (r->has_refs)
      for (auto e : references) r->refs.push_back(Address(e, line, "references"));
  }

  void Record(const DumpRecord& r, uint64_t line) {
    if (r.type.empty()) throw DumpError(line, "record without \"type\"");
    // string_view literals: the length is compared first, no strlen per line.
    using namespace std::string_view_literals;
    if (r.type == "ROOT"sv) {
      if (r.root.empty()) throw DumpError(line, "ROOT record without \"root\"");
      stats_->roots++;
      auto& cat = Category(r.root);
      cat.refs.insert(cat.refs.end(), r.refs.begin(), r.refs.end());
      return;
    }
    if (r.type == "SHAPE"sv) {  // 3.3+: object shapes, not heap objects
      stats_->skipped++;
      return;
    }
    DumpType type = DumpTypeFromName(r.type.data(), r.type.size());
    if (type == kDumpTypeUnknown) throw DumpError(line, "unknown type \"" + Quote(r.type, 40) + "\"");
    if (r.address == 0) throw DumpError(line, "record without \"address\"");
    uint32_t name_id = 0;
    if ((type == kDumpClass || type == kDumpModule) && !r.name.empty()) {
      name_id = heap_.names.Intern(r.name);
    } else if (type == kDumpString && r.has_value) {
      name_id = StringName(r.value);
    }
    if (type == kDumpData) NoteVmRootObject(r);
    heap_.address.push_back(r.address);
    heap_.klass.push_back(r.klass ? heap_.classes.Intern(r.klass) : 0);
    heap_.memsize.push_back(r.memsize >= UINT32_MAX ? UINT32_MAX - 1 : static_cast<uint32_t>(r.memsize));
    heap_.type.push_back(type);
    heap_.name.push_back(name_id);
    if (!r.refs.empty()) {
      if (heap_.refs.size() + r.refs.size() > UINT32_MAX) throw DumpError(line, "more than 2^32 references");
      for (uint64_t a : r.refs) heap_.refs.push_back(a);
    }
    heap_.ref_begin.push_back(static_cast<uint32_t>(heap_.refs.size()));
    uint32_t site = 0;
    if (!r.file.empty() && r.has_line) {
      site = heap_.sites.Intern(uint64_t{FileId(r.file)} << 32 | (r.line > UINT32_MAX ? UINT32_MAX : r.line));
      if (!heap_.has_sites) heap_.site.assign(heap_.size() - 1, 0), heap_.has_sites = true;
    }
    if (heap_.has_sites) heap_.site.push_back(site);
    if (r.has_generation && !heap_.has_generations) {
      heap_.generation.assign(heap_.size() - 1, DumpHeap::kNoGeneration);
      heap_.has_generations = true;
    }
    if (heap_.has_generations)
      heap_.generation.push_back(r.has_generation && r.generation < UINT32_MAX ? static_cast<uint32_t>(r.generation)
                                                                             : DumpHeap::kNoGeneration);
    stats_->objects++;
    if (heap_.size() >= (size_t{1} << 31) - 1) throw DumpError(line, "more than 2^31 objects");
  }

  // Ruby 3.4's buckets of pinned objects and the Ractors: what the graph
  // needs to give the vm root 3.3's shape (roots/vm_roots.h). A few
  // records per dump.
  void NoteVmRootObject(const DumpRecord& r) {
    using namespace std::string_view_literals;
    if (r.struct_name == "VM/pin_array_list"sv && r.klass == 0) heap_.pinned_object_lists.push_back(r.address);
    else if (r.struct_name == "ractor"sv) heap_.ractors.push_back(r.address);
  }

  // Consecutive records mostly share their file: compare with the last
  // one before hashing.
  uint32_t FileId(std::string_view file) {
    if (file != std::string_view(last_file_)) {
      last_file_.assign(file.data(), file.size());
      last_file_id_ = heap_.files.Intern(file);
    }
    return last_file_id_;
  }

  // `"prefix…"`: strings named by the start of their value, printable ASCII
  // only and cut before the first digit (see dump_heap.h); a string of other
  // bytes, or one that starts with a digit, is named by its class alone.
  uint32_t StringName(std::string_view value) {
    if (options_.string_prefix_bytes == 0) return 0;  // contents not wanted: not even "" for an empty one
    size_t n = value.size() < options_.string_prefix_bytes ? value.size() : options_.string_prefix_bytes;
    size_t cut = 0;
    for (; cut < n; cut++) {
      unsigned char c = static_cast<unsigned char>(value[cut]);
      if (c >= '0' && c <= '9') break;
      if (c < 0x20 || c >= 0x7f) return 0;
    }
    if (cut == 0 && !value.empty()) return 0;
    prefix_key_ = "\"";
    prefix_key_.append(value.data(), cut);
    prefix_key_ += value.size() > cut ? "…\"" : "\"";
    uint32_t id = heap_.prefixes.Find(prefix_key_);
    if (id == NameTable::kNone) {
      if (heap_.prefixes.size() > DumpHeap::kMaxPrefixes) {
        heap_.unnamed_strings++;
        return 0;
      }
      id = heap_.prefixes.Intern(prefix_key_);
      heap_.prefix_count.push_back(0);
    }
    heap_.prefix_count[id]++;
    return id;
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
  DumpRecord record_;
  DumpHeap heap_;
  std::string last_file_, prefix_key_;
  uint32_t last_file_id_ = 0;
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
