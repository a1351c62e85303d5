// Fathom::Native.write_new_file(dir, name, tmp_name, bytes) -> nil when
// written, :exists when something is at dir/name already, :no_hard_links
// when the file system cannot link (the caller then renames), or
// [errno, step] on error; nothing is written in those cases.
// lib/fathom/files/atomic_file.rb (AtomicFile.write_new) is the only caller: it
// checks the types and turns [errno, step] into a SystemCallError.
//
// Why native: one release of the GVL for the whole write instead of one per
// syscall (see core/io/new_file.h).
#include "ruby/init.h"

#include <memory>
#include <string>

#include "ruby/runtime/boundary.h"
#include "io/new_file.h"

namespace fathom {

namespace {

// Owned copies: a Ruby string may move (compaction) or change while the
// GVL is released.
struct WriteJob {
  std::string dir, name, tmp_name, data;
  NewFileResult result;
};

std::string Copy(VALUE str) { return std::string(RSTRING_PTR(str), static_cast<size_t>(RSTRING_LEN(str))); }

VALUE NativeWriteNewFile(VALUE, VALUE dir, VALUE name, VALUE tmp_name, VALUE bytes) {
  return RubyMethod([&]() -> VALUE {
    for (VALUE v : {dir, name, tmp_name, bytes}) {
      if (!RB_TYPE_P(v, T_STRING)) ThrowTypeError("fathom: write_new_file takes Strings");
    }
    auto job = std::make_unique<WriteJob>();
    job->dir = Copy(dir);
    job->name = Copy(name);
    job->tmp_name = Copy(tmp_name);
    job->data = Copy(bytes);
    for (const std::string* s : {&job->dir, &job->name, &job->tmp_name}) {
      if (s->find('\0') != std::string::npos) ThrowArgumentError("fathom: a path contains a NUL byte");
    }
    // Leaving the blocking region runs interrupts, which may raise: under
    // Protect, with the job owned here (a longjmp skips no destructor in it).
    WriteJob* j = job.get();
    Protect([j] { WithoutGvl([j] { j->result = WriteNewFile(j->dir, j->name, j->tmp_name, j->data.data(), j->data.size()); }); });
    NewFileResult r = job->result;  // plain data: the copies go before Ruby allocates
    job.reset();
    switch (r.status) {
      case NewFileResult::kWritten: return Qnil;
      case NewFileResult::kExists: return ID2SYM(rb_intern("exists"));
      case NewFileResult::kNoHardLinks: return ID2SYM(rb_intern("no_hard_links"));
      case NewFileResult::kFailed: break;
    }
    return rb_ary_new_from_args(2, INT2NUM(r.error), rb_str_new_cstr(r.step));
  });
}

}  // namespace

void InitNewFile(VALUE mNative) {
  rb_define_module_function(mNative, "write_new_file", RUBY_METHOD_FUNC(NativeWriteNewFile), 4);
}

}  // namespace fathom
