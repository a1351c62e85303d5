// Fathom::Native.analyze_dump(path, max_depth, top, progress_fd, parser, string_contents) -> Hash (parser 1: DOM only)
// Fathom::Native.diff_dumps([a, b(, c)], top, progress_fd, string_contents) -> Hash
// string_contents (true/false): strings named by the start of their value
// (DumpAnalysisOptions::string_contents; off keeps the program's data out).
//
// The whole analysis (read, graph, dominators, encode) runs without the GVL:
// it touches no Ruby object, only the path copied here. Bad input (a
// core DumpError) becomes Fathom::Error with the file's line number;
// lib/fathom/profilers/dump_analysis.rb checks the arguments and wraps the result.
#include "ruby/init.h"

#include <memory>
#include <string>
#include <vector>

#include "ruby/runtime/boundary.h"
#include "dump/dump_analysis.h"

namespace fathom {

namespace {

std::string PathOf(VALUE v) {
  if (!RB_TYPE_P(v, T_STRING)) ThrowTypeError("fathom: a dump path must be a String");
  std::string s(RSTRING_PTR(v), static_cast<size_t>(RSTRING_LEN(v)));
  if (s.find('\0') != std::string::npos) ThrowArgumentError("fathom: a dump path contains a NUL byte");
  return s;
}

DumpAnalysisOptions OptionsOf(VALUE max_depth, VALUE top, VALUE progress_fd, VALUE string_contents) {
  if (string_contents != Qtrue && string_contents != Qfalse) ThrowTypeError("fathom: string_contents must be true or false");
  DumpAnalysisOptions o;
  o.string_contents = string_contents == Qtrue;
  o.max_depth = NUM2UINT(max_depth);
  o.top = NUM2SIZET(top);
  o.progress_fd = NUM2INT(progress_fd);
  return o;
}

VALUE Sym(const char* s) { return ID2SYM(rb_intern(s)); }

VALUE Tallies(const std::vector<DumpTally>& rows) {
  VALUE out = rb_ary_new_capa(static_cast<long>(rows.size()));
  for (const auto& t : rows)
    rb_ary_push(out, rb_ary_new_from_args(3, rb_utf8_str_new(t.key.data(), static_cast<long>(t.key.size())),
                                          ULL2NUM(t.objects), ULL2NUM(t.bytes)));
  return out;
}

// {phase => value} for one of DumpPhase's fields.
VALUE Phases(const std::vector<DumpPhase>& phases, uint64_t DumpPhase::*field = &DumpPhase::nanos) {
  VALUE h = rb_hash_new();
  for (const auto& p : phases) rb_hash_aset(h, Sym(p.name), ULL2NUM(p.*field));
  return h;
}

struct AnalyzeJob {
  std::string path;
  DumpAnalysisOptions options;
  DumpAnalysis result;
  std::string error;  // a DumpError's message
};

VALUE NativeAnalyzeDump(VALUE, VALUE path, VALUE max_depth, VALUE top, VALUE progress_fd, VALUE parser,
                        VALUE string_contents) {
  return RubyMethod([&]() -> VALUE {
    auto job = std::make_unique<AnalyzeJob>();
    job->path = PathOf(path);
    job->options = OptionsOf(max_depth, top, progress_fd, string_contents);
    job->options.dom_parser_only = NUM2INT(parser) == 1;
    AnalyzeJob* j = job.get();
    Protect([j] {
      WithoutGvl([j] {
        try {
          j->result = AnalyzeDump(j->path, j->options);
        } catch (const DumpError& e) {
          j->error = e.what();
        } catch (const std::length_error& e) {
          j->error = e.what();
        }
      });
    });
    if (!job->error.empty()) ThrowFathomError("fathom: %s", job->error.c_str());
    const DumpAnalysis& r = job->result;
    VALUE h = rb_hash_new();
    rb_hash_aset(h, Sym("profile"), rb_str_new(r.profile.data(), static_cast<long>(r.profile.size())));
    VALUE stats = rb_hash_new();
    rb_hash_aset(stats, Sym("objects"), ULL2NUM(r.objects));
    rb_hash_aset(stats, Sym("bytes"), ULL2NUM(r.bytes));
    rb_hash_aset(stats, Sym("reachable_objects"), ULL2NUM(r.reachable_objects));
    rb_hash_aset(stats, Sym("reachable_bytes"), ULL2NUM(r.reachable_bytes));
    rb_hash_aset(stats, Sym("unreachable_objects"), ULL2NUM(r.graph.unreachable_objects));
    rb_hash_aset(stats, Sym("dangling_references"), ULL2NUM(r.graph.dangling_references));
    rb_hash_aset(stats, Sym("lines"), ULL2NUM(r.read.lines));
    rb_hash_aset(stats, Sym("dom_lines"), ULL2NUM(r.read.dom_lines));
    rb_hash_aset(stats, Sym("string_prefixes"), ULL2NUM(r.graph.string_prefixes));
    rb_hash_aset(stats, Sym("named_string_prefixes"), ULL2NUM(r.graph.named_string_prefixes));
    rb_hash_aset(stats, Sym("string_contents"), job->options.string_contents ? Qtrue : Qfalse);
    rb_hash_aset(stats, Sym("root_records"), ULL2NUM(r.read.roots));
    rb_hash_aset(stats, Sym("file_bytes"), ULL2NUM(r.read.file_bytes));
    rb_hash_aset(stats, Sym("input_bytes"), ULL2NUM(r.read.input_bytes));
    rb_hash_aset(stats, Sym("gzipped"), r.read.gzipped ? Qtrue : Qfalse);
    rb_hash_aset(stats, Sym("peak_bytes"), ULL2NUM(r.peak_bytes));
    rb_hash_aset(stats, Sym("phases_ns"), Phases(r.phases));
    rb_hash_aset(stats, Sym("phases_cpu_ns"), Phases(r.phases, &DumpPhase::cpu_nanos));
    rb_hash_aset(stats, Sym("phases_hwm_bytes"), Phases(r.phases, &DumpPhase::hwm_bytes));
    rb_hash_aset(stats, Sym("unavailable_names"), rb_str_new_cstr(kDumpUnavailableNames));
    rb_hash_aset(h, Sym("stats"), stats);
    rb_hash_aset(h, Sym("sites"), r.has_sites ? Tallies(r.sites) : Qnil);
    rb_hash_aset(h, Sym("generations"), r.has_generations ? Tallies(r.generations) : Qnil);
    return h;
  });
}

struct DiffJob {
  std::vector<std::string> paths;
  DumpAnalysisOptions options;
  DumpDiff result;
  std::string error;
};

VALUE NativeDiffDumps(VALUE, VALUE paths, VALUE top, VALUE progress_fd, VALUE string_contents) {
  return RubyMethod([&]() -> VALUE {
    if (!RB_TYPE_P(paths, T_ARRAY) || (RARRAY_LEN(paths) != 2 && RARRAY_LEN(paths) != 3))
      ThrowArgumentError("fathom: diff_dumps takes 2 or 3 paths");
    auto job = std::make_unique<DiffJob>();
    for (long i = 0; i < RARRAY_LEN(paths); i++) job->paths.push_back(PathOf(RARRAY_AREF(paths, i)));
    job->options = OptionsOf(UINT2NUM(64), top, progress_fd, string_contents);
    DiffJob* j = job.get();
    Protect([j] {
      WithoutGvl([j] {
        try {
          j->result = DiffDumps(j->paths, j->options);
        } catch (const DumpError& e) {
          j->error = e.what();
        } catch (const std::length_error& e) {
          j->error = e.what();
        }
      });
    });
    if (!job->error.empty()) ThrowFathomError("fathom: %s", job->error.c_str());
    const DumpDiff& d = job->result;
    VALUE h = rb_hash_new();
    rb_hash_aset(h, Sym("new_objects"), ULL2NUM(d.new_objects));
    rb_hash_aset(h, Sym("new_bytes"), ULL2NUM(d.new_bytes));
    rb_hash_aset(h, Sym("has_sites"), d.has_sites ? Qtrue : Qfalse);
    rb_hash_aset(h, Sym("has_generations"), d.has_generations ? Qtrue : Qfalse);
    rb_hash_aset(h, Sym("by_site"), Tallies(d.by_site));
    rb_hash_aset(h, Sym("by_path"), Tallies(d.by_path));
    rb_hash_aset(h, Sym("phases_ns"), Phases(d.phases));
    return h;
  });
}

}  // namespace

void InitDumpAnalysis(VALUE mNative) {
  rb_define_module_function(mNative, "analyze_dump", RUBY_METHOD_FUNC(NativeAnalyzeDump), 6);
  rb_define_module_function(mNative, "diff_dumps", RUBY_METHOD_FUNC(NativeDiffDumps), 4);
  InitForkedDump(mNative);
}

}  // namespace fathom
