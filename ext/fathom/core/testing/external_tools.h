// Test helpers for checking core output with independent, external readers
// (protoc, go tool pprof): temp dirs, running commands, and a small parser
// for protoc's text format.
#pragma once

#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>
#include <sys/wait.h>
#include <vector>

namespace fathom {
namespace test_util {

// A directory removed (with its contents) when the object goes away.
class TempDir {
 public:
  TempDir() {
    const char* base = std::getenv("TMPDIR");
    std::string tmpl = std::string(base != nullptr && *base != '\0' ? base : "/tmp") + "/fathom-test-XXXXXX";
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    if (mkdtemp(buf.data()) == nullptr) throw std::runtime_error("mkdtemp failed for " + tmpl);
    path_ = buf.data();
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string file(std::string_view name) const { return path_ + "/" + std::string(name); }

 private:
  std::string path_;
};

inline void WriteFile(const std::string& path, std::string_view bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  if (!out) throw std::runtime_error("cannot write " + path);
}

// Single-quotes for /bin/sh.
inline std::string ShellQuote(std::string_view s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'')
      out += "'\\''";
    else
      out += c;
  }
  return out + "'";
}

struct CommandResult {
  int exit_code = -1;  // -1 if it did not exit normally
  std::string output;  // stdout and stderr, interleaved
};

inline CommandResult RunCommand(const std::string& command) {
  CommandResult r;
  FILE* p = popen((command + " 2>&1").c_str(), "r");
  if (p == nullptr) return r;
  char buf[4096];
  size_t n;
  while ((n = fread(buf, 1, sizeof buf, p)) > 0) r.output.append(buf, n);
  int status = pclose(p);
  if (status != -1 && WIFEXITED(status)) r.exit_code = WEXITSTATUS(status);
  return r;
}

inline bool ToolOnPath(const std::string& name) {
  return RunCommand("command -v " + ShellQuote(name) + " >/dev/null").exit_code == 0;
}

inline bool InCi() {
  const char* ci = std::getenv("CI");
  return ci != nullptr && std::string_view(ci) == "true";
}

// Skips the test when something it needs from the environment is missing,
// except on CI (CI=true), where that means the environment is broken and the
// test must fail instead.
#define FATHOM_REQUIRE_ENV(ok, what)                                           \
  do {                                                                         \
    if (!(ok)) {                                                               \
      if (::fathom::test_util::InCi()) FAIL() << what << " (and CI=true)";     \
      GTEST_SKIP() << what;                                                    \
    }                                                                          \
  } while (0)

#define FATHOM_REQUIRE_TOOL(name) \
  FATHOM_REQUIRE_ENV(::fathom::test_util::ToolOnPath(name), name << " is not on PATH")

#define FATHOM_REQUIRE_FILE(path) \
  FATHOM_REQUIRE_ENV(std::filesystem::exists(path), path << " does not exist")

// protoc's text format, as printed by `protoc --decode`: `name: value` lines
// and `name { ... }` blocks. Values are kept as text; quoted strings are
// unescaped.
struct TextMessage {
  std::map<std::string, std::vector<std::string>> fields;
  std::map<std::string, std::vector<TextMessage>> messages;

  // The single value of a scalar field; "" (proto3's default) when absent.
  std::string get(const std::string& name) const {
    auto it = fields.find(name);
    if (it == fields.end()) return "";
    if (it->second.size() != 1) throw std::runtime_error("field " + name + " is repeated");
    return it->second[0];
  }
  int64_t num(const std::string& name) const {
    std::string v = get(name);
    return v.empty() ? 0 : std::stoll(v);
  }
  const std::vector<std::string>& all(const std::string& name) const {
    static const std::vector<std::string> kNone;
    auto it = fields.find(name);
    return it == fields.end() ? kNone : it->second;
  }
  const std::vector<TextMessage>& children(const std::string& name) const {
    static const std::vector<TextMessage> kNone;
    auto it = messages.find(name);
    return it == messages.end() ? kNone : it->second;
  }
};

namespace detail {

inline std::string UnquoteTextString(std::string_view v) {
  if (v.size() < 2 || v.front() != '"' || v.back() != '"') return std::string(v);
  std::string out;
  for (size_t i = 1; i + 1 < v.size(); i++) {
    char c = v[i];
    if (c != '\\') {
      out += c;
      continue;
    }
    char e = v[++i];
    if (e >= '0' && e <= '7') {  // octal escape, up to three digits
      int x = 0;
      for (int k = 0; k < 3 && i + 1 < v.size() && v[i] >= '0' && v[i] <= '7'; k++) x = x * 8 + (v[i++] - '0');
      i--;
      out += static_cast<char>(x);
    } else if (e == 'n') {
      out += '\n';
    } else if (e == 't') {
      out += '\t';
    } else if (e == 'r') {
      out += '\r';
    } else {
      out += e;  // \" \\ \'
    }
  }
  return out;
}

inline size_t ParseTextBody(const std::vector<std::string>& lines, size_t i, TextMessage& msg) {
  for (; i < lines.size(); i++) {
    std::string_view line = lines[i];
    size_t b = line.find_first_not_of(' ');
    if (b == std::string_view::npos) continue;
    line.remove_prefix(b);
    if (line == "}") return i;
    if (line.size() >= 2 && line.substr(line.size() - 2) == " {") {
      TextMessage child;
      i = ParseTextBody(lines, i + 1, child);
      msg.messages[std::string(line.substr(0, line.size() - 2))].push_back(std::move(child));
      continue;
    }
    size_t colon = line.find(": ");
    if (colon == std::string_view::npos) throw std::runtime_error("bad text-format line: " + std::string(line));
    msg.fields[std::string(line.substr(0, colon))].push_back(UnquoteTextString(line.substr(colon + 2)));
  }
  return i;
}

}  // namespace detail

inline TextMessage ParseTextFormat(const std::string& text) {
  std::vector<std::string> lines;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    lines.push_back(text.substr(start, end - start));
    start = end + 1;
  }
  TextMessage root;
  detail::ParseTextBody(lines, 0, root);
  return root;
}

}  // namespace test_util
}  // namespace fathom
