// A structural check of a Firefox Profiler *processed* profile, version 48
// (the version firefox_profile.h writes), on a parsed JSON document.
//
// It checks what the profiler relies on when it loads and upgrades such a
// file (src/types/profile.js and markers.js at the commit that introduced
// v48, and the upgraders from v48 on in processed-profile-versioning.ts):
//  - meta: version numbers, interval, startTime, product, categories (with a
//    grey one: the profiler's default category), markerSchema (display
//    locations and field formats from v48's vocabulary), and the optional
//    thread lists pointing at real threads;
//  - each thread: its scalar fields, and its tables (samples, markers,
//    stackTable, frameTable, funcTable, resourceTable, nativeSymbols), each
//    with an integer `length` equal to every column's length;
//  - every index in range: samples -> stacks, stack prefix < own index,
//    stack -> frame, frame -> func, func name/fileName -> stringArray, marker
//    name -> stringArray, categories and subcategories -> meta.categories;
//  - samples in time order; marker phases with the times they need; marker
//    data typed by a schema, with values of the kind its fields' formats say,
//    and the keys the profiler reads whatever the schema (cause,
//    innerWindowID, stack) in the shape it expects.
// The Ruby tests run this same check as a command
// (test/support/firefox_format_tool/firefox_format_check.cc, called by
// test/support/firefox_format.rb): one validator for both.
//
// Errors name the path of the bad field, e.g.
// "threads[1].stackTable.prefix[3]: 7 is not < 3 (its own index)".
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "testing/mini_json.h"

namespace fathom {
namespace test_util {

class FirefoxFormatChecker {
 public:
  using Value = json::Value;
  static constexpr int64_t kVersion = 48;

  // All problems found (empty = valid), at most kMaxErrors of them.
  static std::vector<std::string> Check(const Value& profile) {
    FirefoxFormatChecker c;
    c.CheckProfile(profile);
    return c.errors_;
  }

 private:
  static constexpr size_t kMaxErrors = 50;

  struct CategoryInfo {
    size_t subcategories;
  };
  struct SchemaInfo {
    std::vector<std::pair<std::string, std::string>> fields;  // key, format (or "table")
  };

  std::vector<std::string> errors_;
  std::vector<CategoryInfo> categories_;
  bool has_cpu_delta_unit_ = false;  // meta.sampleUnits.threadCPUDelta is valid
  std::vector<std::pair<std::string, SchemaInfo>> schemas_;

  void Error(const std::string& path, const std::string& what) {
    if (errors_.size() < kMaxErrors) errors_.push_back(path + ": " + what);
  }

  static std::string Num(double d) {
    char buf[32];
    snprintf(buf, sizeof buf, "%.17g", d);
    return buf;
  }

  // Required member; reports and returns nullptr if absent.
  const Value* Field(const Value& obj, const std::string& path, std::string_view key) {
    const Value* v = obj.find(key);
    if (v == nullptr) Error(path + "." + std::string(key), "missing");
    return v;
  }

  const Value* Typed(const Value& obj, const std::string& path, std::string_view key, Value::Type type,
                     const char* type_name, bool nullable = false) {
    const Value* v = Field(obj, path, key);
    if (v == nullptr) return nullptr;
    if (nullable && v->is_null()) return v;
    if (v->type() != type) {
      Error(path + "." + std::string(key), std::string("must be ") + type_name + (nullable ? " or null" : ""));
      return nullptr;
    }
    return v;
  }

  const Value* Object(const Value& o, const std::string& p, std::string_view k) {
    return Typed(o, p, k, Value::Type::kObject, "an object");
  }
  const Value* Array(const Value& o, const std::string& p, std::string_view k) {
    return Typed(o, p, k, Value::Type::kArray, "an array");
  }
  const Value* String(const Value& o, const std::string& p, std::string_view k) {
    return Typed(o, p, k, Value::Type::kString, "a string");
  }
  const Value* Number(const Value& o, const std::string& p, std::string_view k, bool nullable = false) {
    return Typed(o, p, k, Value::Type::kNumber, "a number", nullable);
  }
  const Value* Bool(const Value& o, const std::string& p, std::string_view k) {
    return Typed(o, p, k, Value::Type::kBool, "a boolean");
  }
  const Value* Integer(const Value& o, const std::string& p, std::string_view k) {
    const Value* v = Field(o, p, k);
    if (v != nullptr && !v->is_int()) {
      Error(p + "." + std::string(k), "must be an integer");
      return nullptr;
    }
    return v;
  }

  // ---- tables ------------------------------------------------------------

  // A struct-of-arrays table: `length` and the named columns, all that long.
  // Returns the length, or -1 if the table is unusable.
  int64_t Table(const Value& table, const std::string& path, const std::vector<std::string_view>& columns) {
    const Value* len = Integer(table, path, "length");
    int64_t n = -1;
    if (len != nullptr) {
      if (len->as_int() < 0)
        Error(path + ".length", "must be >= 0");
      else
        n = len->as_int();
    }
    bool ok = n >= 0;
    for (std::string_view col : columns) {
      const Value* c = Array(table, path, col);
      if (c == nullptr) {
        ok = false;
        continue;
      }
      if (n >= 0 && static_cast<int64_t>(c->size()) != n) {
        Error(path + "." + std::string(col), "has " + std::to_string(c->size()) + " entries but length is " +
                                                 std::to_string(n));
        ok = false;
      }
    }
    return ok ? n : -1;
  }

  // Each element of table[col] must satisfy pred (given element and index).
  template <typename Pred>
  void EachCell(const Value& table, const std::string& path, std::string_view col, Pred&& pred) {
    const Value* c = table.find(col);
    if (c == nullptr || !c->is_array()) return;
    for (size_t i = 0; i < c->size(); i++) {
      std::string why = pred((*c)[i], i);
      if (!why.empty()) Error(path + "." + std::string(col) + "[" + std::to_string(i) + "]", why);
    }
  }

  static std::string IndexError(const Value& v, int64_t limit, bool nullable, const char* into) {
    if (nullable && v.is_null()) return "";
    if (!v.is_int()) return std::string("must be an integer index into ") + into + (nullable ? " or null" : "");
    if (v.as_int() < 0 || v.as_int() >= limit)
      return std::to_string(v.as_int()) + " is out of range for " + into + " (length " + std::to_string(limit) + ")";
    return "";
  }

  void IndexColumn(const Value& t, const std::string& p, std::string_view col, int64_t limit, bool nullable,
                   const char* into) {
    EachCell(t, p, col, [&](const Value& v, size_t) { return IndexError(v, limit, nullable, into); });
  }

  void IntColumn(const Value& t, const std::string& p, std::string_view col, bool nullable, int64_t min) {
    EachCell(t, p, col, [&](const Value& v, size_t) -> std::string {
      if (nullable && v.is_null()) return "";
      if (!v.is_int() || v.as_int() < min)
        return "must be an integer >= " + std::to_string(min) + (nullable ? " or null" : "");
      return "";
    });
  }

  void NumberColumn(const Value& t, const std::string& p, std::string_view col, bool nullable) {
    EachCell(t, p, col, [&](const Value& v, size_t) -> std::string {
      if (v.is_number() || (nullable && v.is_null())) return "";
      return nullable ? "must be a number or null" : "must be a number";
    });
  }

  void NonNegativeColumn(const Value& t, const std::string& p, std::string_view col, bool nullable) {
    EachCell(t, p, col, [&](const Value& v, size_t) -> std::string {
      if ((nullable && v.is_null()) || (v.is_number() && v.as_double() >= 0)) return "";
      return nullable ? "must be a number >= 0 or null" : "must be a number >= 0";
    });
  }

  void BoolColumn(const Value& t, const std::string& p, std::string_view col) {
    EachCell(t, p, col, [&](const Value& v, size_t) { return v.is_bool() ? "" : "must be a boolean"; });
  }

  // category/subcategory column pair, both indexing meta.categories.
  void CategoryColumns(const Value& t, const std::string& p, bool nullable) {
    IndexColumn(t, p, "category", static_cast<int64_t>(categories_.size()), nullable, "meta.categories");
    const Value* cat = t.find("category");
    EachCell(t, p, "subcategory", [&](const Value& v, size_t i) -> std::string {
      const Value* c = cat != nullptr && cat->is_array() && i < cat->size() ? &(*cat)[i] : nullptr;
      if (c == nullptr || !c->is_int() || c->as_int() < 0 || c->as_int() >= static_cast<int64_t>(categories_.size()))
        return nullable && v.is_null() ? "" : (v.is_int() ? "" : "must be an integer");
      if (!v.is_int()) return "must be an integer (its category is set)";
      size_t n = categories_[static_cast<size_t>(c->as_int())].subcategories;
      if (v.as_int() < 0 || v.as_int() >= static_cast<int64_t>(n))
        return std::to_string(v.as_int()) + " is out of range for category " + std::to_string(c->as_int()) + "'s " +
               std::to_string(n) + " subcategories";
      return "";
    });
  }

  // ---- the profile ----------------------------------------------------------

  void CheckProfile(const Value& profile) {
    if (!profile.is_object()) {
      Error("(profile)", "must be an object");
      return;
    }
    const Value* meta = Object(profile, "", "meta");
    const Value* threads = Array(profile, "", "threads");
    Array(profile, "", "libs");
    if (meta != nullptr) CheckMeta(*meta, threads != nullptr ? threads->size() : 0);
    if (threads == nullptr) return;
    if (threads->size() == 0) Error("threads", "must not be empty (the profiler cannot open a profile without threads)");
    for (size_t i = 0; i < threads->size(); i++) {
      std::string path = "threads[" + std::to_string(i) + "]";
      const Value& t = (*threads)[i];
      if (!t.is_object()) {
        Error(path, "must be an object");
        continue;
      }
      CheckThread(t, path);
    }
  }

  void CheckMeta(const Value& meta, size_t thread_count) {
    const std::string p = "meta";
    if (const Value* v = Integer(meta, p, "preprocessedProfileVersion"); v != nullptr && v->as_int() != kVersion)
      Error(p + ".preprocessedProfileVersion", "is " + std::to_string(v->as_int()) + ", this check is for " +
                                                    std::to_string(kVersion));
    Integer(meta, p, "version");
    if (const Value* v = Number(meta, p, "interval"); v != nullptr && !(v->as_double() > 0))
      Error(p + ".interval", "must be > 0");
    Number(meta, p, "startTime");
    Number(meta, p, "processType");
    String(meta, p, "product");
    if (const Value* v = Integer(meta, p, "stackwalk"); v != nullptr && v->as_int() != 0 && v->as_int() != 1)
      Error(p + ".stackwalk", "must be 0 or 1");
    for (const char* opt : {"endTime", "profilingStartTime", "profilingEndTime"})
      if (meta.find(opt) != nullptr) Number(meta, p, opt);
    if (meta.find("symbolicated") != nullptr) Bool(meta, p, "symbolicated");
    // sampleUnits (optional): the unit of samples.threadCPUDelta.
    if (meta.find("sampleUnits") != nullptr) {
      if (const Value* su = Object(meta, p, "sampleUnits")) {
        const std::string sp = p + ".sampleUnits";
        if (const Value* t = String(*su, sp, "time"); t != nullptr && t->as_string() != "ms")
          Error(sp + ".time", "must be \"ms\" (v48)");
        if (const Value* e = String(*su, sp, "eventDelay"); e != nullptr && e->as_string() != "ms")
          Error(sp + ".eventDelay", "must be \"ms\"");
        if (const Value* d = String(*su, sp, "threadCPUDelta")) {
          const std::string& u = d->as_string();
          if (u != "ns" && u != "\u00b5s" && u != "\xc2\xb5s" && u != "variable CPU cycles")
            Error(sp + ".threadCPUDelta", "\"" + u + "\" is not ns, \u00b5s or variable CPU cycles");
          else
            has_cpu_delta_unit_ = true;
        }
      }
    }

    if (const Value* cats = Array(meta, p, "categories")) {
      bool grey = false;
      for (size_t i = 0; i < cats->size(); i++) {
        std::string cp = p + ".categories[" + std::to_string(i) + "]";
        const Value& c = (*cats)[i];
        size_t subs = 0;
        if (!c.is_object()) {
          Error(cp, "must be an object");
        } else {
          String(c, cp, "name");
          if (const Value* color = String(c, cp, "color")) {
            if (!IsColor(color->as_string())) Error(cp + ".color", "unknown colour \"" + color->as_string() + "\"");
            grey = grey || color->as_string() == "grey";
          }
          if (const Value* s = Array(c, cp, "subcategories")) {
            subs = s->size();
            if (subs == 0) Error(cp + ".subcategories", "must not be empty (subcategory 0 is the category itself)");
            for (size_t k = 0; k < s->size(); k++)
              if (!(*s)[k].is_string()) Error(cp + ".subcategories[" + std::to_string(k) + "]", "must be a string");
          }
        }
        categories_.push_back(CategoryInfo{subs});
      }
      if (!grey) Error(p + ".categories", "has no grey category (the profiler's default category for samples without a stack)");
    }

    if (const Value* schemas = Array(meta, p, "markerSchema")) {
      for (size_t i = 0; i < schemas->size(); i++) CheckSchema((*schemas)[i], p + ".markerSchema[" + std::to_string(i) + "]");
    }

    for (const char* list : {"initialVisibleThreads", "initialSelectedThreads"}) {
      if (meta.find(list) == nullptr) continue;
      const Value* a = Array(meta, p, list);
      if (a == nullptr) continue;
      for (size_t i = 0; i < a->size(); i++) {
        std::string why = IndexError((*a)[i], static_cast<int64_t>(thread_count), false, "threads");
        if (!why.empty()) Error(p + "." + list + "[" + std::to_string(i) + "]", why);
      }
    }
  }

  static bool IsColor(const std::string& c) {
    static const std::set<std::string> kColors = {"transparent", "purple", "green",   "orange",   "yellow",
                                                  "lightblue",   "blue",   "brown",   "magenta",  "red",
                                                  "lightred",    "darkgrey", "darkgray", "grey", "gray"};
    return kColors.count(c) != 0;
  }

  static bool IsStringFormat(const std::string& f) { return f == "string" || f == "url" || f == "file-path"; }
  static bool IsNumberFormat(const std::string& f) {
    static const std::set<std::string> kNumeric = {"duration",     "time",         "seconds",   "milliseconds",
                                                   "microseconds", "nanoseconds",  "bytes",     "percentage",
                                                   "integer",      "decimal"};
    return kNumeric.count(f) != 0;
  }

  void CheckSchema(const Value& s, const std::string& sp) {
    if (!s.is_object()) {
      Error(sp, "must be an object");
      return;
    }
    const Value* name = String(s, sp, "name");
    for (const char* label : {"tooltipLabel", "tableLabel", "chartLabel"})
      if (s.find(label) != nullptr) String(s, sp, label);
    if (const Value* display = Array(s, sp, "display")) {
      static const std::set<std::string> kLocations = {"marker-chart",    "marker-table", "timeline-overview",
                                                       "timeline-memory", "timeline-ipc", "timeline-fileio",
                                                       "stack-chart"};
      for (size_t k = 0; k < display->size(); k++) {
        const Value& d = (*display)[k];
        if (!d.is_string() || kLocations.count(d.as_string()) == 0)
          Error(sp + ".display[" + std::to_string(k) + "]", "must be a v48 display location");
      }
    }
    SchemaInfo info;
    // v48 lists fields under "data"; "fields" is v55's name.
    if (const Value* data = Array(s, sp, "data")) {
      for (size_t k = 0; k < data->size(); k++) {
        std::string fp = sp + ".data[" + std::to_string(k) + "]";
        const Value& f = (*data)[k];
        if (!f.is_object()) {
          Error(fp, "must be an object");
          continue;
        }
        if (f.find("key") == nullptr) {  // a static {label, value} entry
          String(f, fp, "label");
          String(f, fp, "value");
          continue;
        }
        const Value* key = String(f, fp, "key");
        if (f.find("label") != nullptr) String(f, fp, "label");
        if (f.find("searchable") != nullptr) Bool(f, fp, "searchable");
        const Value* format = Field(f, fp, "format");
        std::string fmt;
        if (format != nullptr && format->is_string()) {
          fmt = format->as_string();
          if (!IsStringFormat(fmt) && !IsNumberFormat(fmt) && fmt != "unique-string" && fmt != "list")
            Error(fp + ".format", "\"" + fmt + "\" is not a v48 format");
        } else if (format != nullptr && format->is_object() && format->find("type") != nullptr &&
                   (*format)["type"].is_string() && (*format)["type"].as_string() == "table") {
          fmt = "table";
        } else if (format != nullptr) {
          Error(fp + ".format", "must be a format name or a table format");
        }
        if (key != nullptr) info.fields.emplace_back(key->as_string(), fmt);
      }
    }
    if (name != nullptr) {
      for (const auto& [n, _] : schemas_)
        if (n == name->as_string()) Error(sp + ".name", "\"" + n + "\" is used by another schema");
      schemas_.emplace_back(name->as_string(), std::move(info));
    }
  }

  const SchemaInfo* FindSchema(const std::string& name) const {
    for (const auto& [n, info] : schemas_)
      if (n == name) return &info;
    return nullptr;
  }

  void CheckThread(const Value& t, const std::string& p) {
    String(t, p, "processType");
    Number(t, p, "processStartupTime");
    Number(t, p, "processShutdownTime", true);
    Number(t, p, "registerTime");
    Number(t, p, "unregisterTime", true);
    Array(t, p, "pausedRanges");
    String(t, p, "name");
    Bool(t, p, "isMainThread");
    String(t, p, "pid");  // a string since v47
    if (const Value* tid = Field(t, p, "tid"); tid != nullptr && !tid->is_number() && !tid->is_string())
      Error(p + ".tid", "must be a number or a string");
    if (t.find("processName") != nullptr) String(t, p, "processName");

    int64_t nstrings = -1;
    if (const Value* sa = Array(t, p, "stringArray")) {
      nstrings = static_cast<int64_t>(sa->size());
      for (size_t i = 0; i < sa->size(); i++)
        if (!(*sa)[i].is_string()) Error(p + ".stringArray[" + std::to_string(i) + "]", "must be a string");
    }

    const Value* rt = Object(t, p, "resourceTable");
    int64_t nresources = rt ? Table(*rt, p + ".resourceTable", {"lib", "name", "host", "type"}) : -1;
    if (rt && nresources >= 0) {
      IndexColumn(*rt, p + ".resourceTable", "name", nstrings, false, "stringArray");
      IndexColumn(*rt, p + ".resourceTable", "host", nstrings, true, "stringArray");
    }
    const Value* ns = Object(t, p, "nativeSymbols");
    int64_t nsymbols = ns ? Table(*ns, p + ".nativeSymbols", {"libIndex", "address", "name", "functionSize"}) : -1;

    const Value* ft = Object(t, p, "funcTable");
    const std::string fp = p + ".funcTable";
    int64_t nfuncs =
        ft ? Table(*ft, fp, {"name", "isJS", "relevantForJS", "resource", "fileName", "lineNumber", "columnNumber"})
           : -1;
    if (ft && nfuncs >= 0 && nstrings >= 0) {
      IndexColumn(*ft, fp, "name", nstrings, false, "stringArray");
      IndexColumn(*ft, fp, "fileName", nstrings, true, "stringArray");
      BoolColumn(*ft, fp, "isJS");
      BoolColumn(*ft, fp, "relevantForJS");
      EachCell(*ft, fp, "resource", [&](const Value& v, size_t) -> std::string {
        if (v.is_int() && v.as_int() == -1) return "";
        return IndexError(v, std::max<int64_t>(nresources, 0), false, "resourceTable (or -1)");
      });
      IntColumn(*ft, fp, "lineNumber", true, 0);
      IntColumn(*ft, fp, "columnNumber", true, 0);
    }

    const Value* fr = Object(t, p, "frameTable");
    const std::string frp = p + ".frameTable";
    int64_t nframes = fr ? Table(*fr, frp,
                                 {"address", "inlineDepth", "category", "subcategory", "func", "nativeSymbol",
                                  "innerWindowID", "implementation", "line", "column"})
                         : -1;
    if (fr && nframes >= 0) {
      IntColumn(*fr, frp, "address", false, -1);
      IntColumn(*fr, frp, "inlineDepth", false, 0);
      CategoryColumns(*fr, frp, true);
      if (nfuncs >= 0) IndexColumn(*fr, frp, "func", nfuncs, false, "funcTable");
      if (nsymbols >= 0) IndexColumn(*fr, frp, "nativeSymbol", nsymbols, true, "nativeSymbols");
      NumberColumn(*fr, frp, "innerWindowID", true);
      if (nstrings >= 0) IndexColumn(*fr, frp, "implementation", nstrings, true, "stringArray");
      IntColumn(*fr, frp, "line", true, 0);
      IntColumn(*fr, frp, "column", true, 0);
    }

    const Value* st = Object(t, p, "stackTable");
    const std::string sp = p + ".stackTable";
    int64_t nstacks = st ? Table(*st, sp, {"frame", "category", "subcategory", "prefix"}) : -1;
    if (st && nstacks >= 0) {
      if (nframes >= 0) IndexColumn(*st, sp, "frame", nframes, false, "frameTable");
      CategoryColumns(*st, sp, false);
      EachCell(*st, sp, "prefix", [&](const Value& v, size_t i) -> std::string {
        if (v.is_null()) return "";
        if (!v.is_int() || v.as_int() < 0) return "must be an integer index into stackTable or null";
        if (v.as_int() >= static_cast<int64_t>(i))
          return std::to_string(v.as_int()) + " is not < " + std::to_string(i) + " (its own index)";
        return "";
      });
    }

    const Value* sm = Object(t, p, "samples");
    const std::string smp = p + ".samples";
    if (sm) {
      int64_t n = Table(*sm, smp, {"stack", "time"});
      if (const Value* wt = String(*sm, smp, "weightType")) {
        const std::string& w = wt->as_string();
        if (w != "samples" && w != "tracing-ms" && w != "bytes")
          Error(smp + ".weightType", "\"" + w + "\" is not samples, tracing-ms or bytes");
      }
      if (const Value* w = Field(*sm, smp, "weight"); w != nullptr && !w->is_null()) {
        if (!w->is_array())
          Error(smp + ".weight", "must be an array or null");
        else if (n >= 0 && static_cast<int64_t>(w->size()) != n)
          Error(smp + ".weight", "has " + std::to_string(w->size()) + " entries but length is " + std::to_string(n));
        else
          NumberColumn(*sm, smp, "weight", false);
      }
      if (n >= 0) {
        if (nstacks >= 0) IndexColumn(*sm, smp, "stack", nstacks, true, "stackTable");
        NumberColumn(*sm, smp, "time", false);
        const Value& time = (*sm)["time"];
        for (size_t i = 1; i < time.size(); i++)
          if (time[i].is_number() && time[i - 1].is_number() && time[i].as_double() < time[i - 1].as_double())
            Error(smp + ".time[" + std::to_string(i) + "]", "goes back in time (samples must be sorted)");
      }
      // threadCPUDelta (optional): a CPU delta >= 0 or null per sample, in
      // the unit meta.sampleUnits gives (required with the column).
      if (sm->find("threadCPUDelta") != nullptr) {
        if (const Value* d = Array(*sm, smp, "threadCPUDelta")) {
          if (n >= 0 && static_cast<int64_t>(d->size()) != n)
            Error(smp + ".threadCPUDelta", "has " + std::to_string(d->size()) + " entries but length is " +
                                               std::to_string(n));
          NonNegativeColumn(*sm, smp, "threadCPUDelta", true);
          if (!has_cpu_delta_unit_)
            Error(smp + ".threadCPUDelta", "needs meta.sampleUnits.threadCPUDelta (its unit)");
        }
      }
    }

    // jsAllocations (optional): v48's JsAllocationsTable.
    if (t.find("jsAllocations") != nullptr) {
      if (const Value* ja = Object(t, p, "jsAllocations")) {
        const std::string jp = p + ".jsAllocations";
        int64_t n = Table(*ja, jp, {"time", "className", "typeName", "coarseType", "weight", "inNursery", "stack"});
        if (const Value* wt = String(*ja, jp, "weightType"); wt != nullptr && wt->as_string() != "bytes")
          Error(jp + ".weightType", "must be \"bytes\"");
        if (n >= 0) {
          NumberColumn(*ja, jp, "time", false);
          for (const char* col : {"className", "typeName", "coarseType"})
            EachCell(*ja, jp, col, [](const Value& v, size_t) { return v.is_string() ? "" : "must be a string"; });
          NonNegativeColumn(*ja, jp, "weight", false);
          BoolColumn(*ja, jp, "inNursery");
          if (nstacks >= 0) IndexColumn(*ja, jp, "stack", nstacks, true, "stackTable");
          const Value& time = (*ja)["time"];
          for (size_t i = 1; i < time.size(); i++)
            if (time[i].is_number() && time[i - 1].is_number() && time[i].as_double() < time[i - 1].as_double())
              Error(jp + ".time[" + std::to_string(i) + "]", "goes back in time (allocations must be sorted)");
        }
      }
    }

    const Value* mk = Object(t, p, "markers");
    if (mk) CheckMarkers(*mk, p + ".markers", nstrings, nstacks);
  }

  void CheckMarkers(const Value& mk, const std::string& mp, int64_t nstrings, int64_t nstacks) {
    int64_t n = Table(mk, mp, {"data", "name", "startTime", "endTime", "phase", "category"});
    if (n < 0) return;
    if (nstrings >= 0) IndexColumn(mk, mp, "name", nstrings, false, "stringArray");
    IndexColumn(mk, mp, "category", static_cast<int64_t>(categories_.size()), false, "meta.categories");
    NumberColumn(mk, mp, "startTime", true);
    NumberColumn(mk, mp, "endTime", true);
    const Value& start = mk["startTime"];
    const Value& end = mk["endTime"];
    EachCell(mk, mp, "phase", [&](const Value& v, size_t i) -> std::string {
      if (!v.is_int() || v.as_int() < 0 || v.as_int() > 3) return "must be 0 (instant), 1 (interval), 2 or 3";
      bool need_start = v.as_int() != 3, need_end = v.as_int() == 1 || v.as_int() == 3;
      if (need_start && !start[i].is_number()) return "phase " + std::to_string(v.as_int()) + " needs a startTime";
      if (need_end && !end[i].is_number()) return "phase " + std::to_string(v.as_int()) + " needs an endTime";
      if (v.as_int() == 1 && end[i].as_double() < start[i].as_double())
        return "interval ends (" + Num(end[i].as_double()) + ") before it starts (" + Num(start[i].as_double()) + ")";
      return "";
    });
    EachCell(mk, mp, "data", [&](const Value& d, size_t i) -> std::string {
      if (d.is_null()) return "";
      if (!d.is_object()) return "must be an object or null";
      const Value* type = d.find("type");
      if (type == nullptr || !type->is_string()) return "needs a string \"type\"";
      // Keys the profiler reads whatever the schema: "cause" is a backtrace
      // ({stack, time?, tid?}) that the v60 upgrader rewrites, and crashes on
      // if it is not an object; "innerWindowID" a page id; "stack" is Gecko's
      // pre-processing form of a cause.
      std::string at = mp + ".data[" + std::to_string(i) + "]";
      if (const Value* cause = d.find("cause")) {
        const Value* stack = cause->is_object() ? cause->find("stack") : nullptr;
        if (stack == nullptr) {
          Error(at + ".cause", "must be an object {stack, time} (a backtrace), not a value to display");
        } else {
          std::string why = IndexError(*stack, nstacks, false, "stackTable");
          if (!why.empty()) Error(at + ".cause.stack", why);
        }
      }
      if (const Value* w = d.find("innerWindowID"); w != nullptr && !w->is_number())
        Error(at + ".innerWindowID", "must be a number (a browser page id)");
      if (d.find("stack") != nullptr) Error(at + ".stack", "is the Gecko format's marker stack; processed profiles use cause");
      const SchemaInfo* schema = FindSchema(type->as_string());
      if (schema == nullptr) return "type \"" + type->as_string() + "\" has no schema in meta.markerSchema";
      for (const auto& [key, format] : schema->fields) {
        const Value* v = d.find(key);
        if (v == nullptr || v->is_null()) continue;  // fields are optional
        std::string fat = at + "." + key;
        if (IsStringFormat(format) && !v->is_string()) Error(fat, "must be a string (format " + format + ")");
        if (IsNumberFormat(format) && !v->is_number()) Error(fat, "must be a number (format " + format + ")");
        if (format == "unique-string") {
          std::string why = IndexError(*v, nstrings, false, "stringArray");
          if (!why.empty()) Error(fat, why);
        }
      }
      return "";
    });
  }
};

// Convenience: the errors joined into one message ("" = valid).
inline std::string FirefoxFormatErrors(const json::Value& profile) {
  std::string out;
  for (const std::string& e : FirefoxFormatChecker::Check(profile)) {
    if (!out.empty()) out += "\n";
    out += e;
  }
  return out;
}

}  // namespace test_util
}  // namespace fathom
