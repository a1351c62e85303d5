// Fathom::Native.heap_dump_forked: an ObjectSpace.dump_all-shaped heap
// dump written by a forked child from a copy-on-write image of the heap,
// so the app pauses for fork() only (docs/internals/dump.md, "Writing
// dumps: fathom dump"). The supervision is the forked retention
// snapshot's (core/io/child_process.h; docs/internals/retention.md,
// "Forked snapshots"): the same rules, the same reasons.
//
// Parent (GVL held): rb_gc_disable (finishes a lazy sweep here, not in
// the child), every signal blocked across fork(), GC back on at once, then
// the wait for the child without the GVL (cancellable: a Thread#kill or an
// Interrupt kills and reaps the child).
// Child: die with the parent, close every descriptor but its pipe and the
// dump's file (ForkAndCollect), block every signal, bound its address
// space, then Ruby's roots
// (rb_objspace_reachable_objects_from_root) as ROOT lines and every slot
// of the heap (rb_objspace_each_objects, as dump_all) as one line each,
// its references from rb_objspace_reachable_objects_from. Nothing there
// allocates a Ruby object or calls a Ruby method; the only memory is the
// writer's buffer (and zlib's). It fsyncs the file, sends its counts
// through the pipe and leaves with _exit. The caller (lib/) owns the file:
// it opened it (a temp name) and renames it once this returned.
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <string>

#include <ruby/version.h>

#include "base/clock.h"
#include "dump/dump_writer.h"
#include "io/child_process.h"
#include "ruby/fork/forked_child.h"
#include "ruby/init.h"
#include "ruby/runtime/boundary.h"
#include "ruby/fork/fork_child_reset.h"
#include "ruby/runtime/ruby_private_api.h"

namespace fathom {
namespace {

#if defined(FATHOM_HAVE_HEAP_WALK) && defined(FATHOM_HAVE_SLOT_WALK) && defined(HAVE_RB_OBJ_MEMSIZE_OF)
constexpr bool kDumpAvailable = true;
#else
constexpr bool kDumpAvailable = false;
void rb_objspace_reachable_objects_from_root(void (*)(const char*, VALUE, void*), void*) {}
void rb_objspace_reachable_objects_from(VALUE, void (*)(VALUE, void*), void*) {}
void rb_objspace_each_objects(int (*)(void*, void*, size_t, void*), void*) {}
size_t rb_obj_memsize_of(VALUE) { return 0; }
#endif

// Set while a dump's child runs (GVL held to read or change it). Cleared
// in a process forked meanwhile, where that dump never ends
// (fork/fork_child_reset.h).
bool g_dump_in_progress = false;

#if RUBY_API_VERSION_MAJOR * 100 + RUBY_API_VERSION_MINOR >= 303
constexpr bool kImemoHasNoClass = true;
#else
constexpr bool kImemoHasNoClass = false;
#endif

// The counts the child sends back, in this order.
constexpr int kStatCount = 6;

struct DumpState {
  DumpWriter* writer;
  bool values;
  VALUE klass;  // the current object's class: dump_all leaves it out of references
  uint64_t objects = 0;
  uint64_t roots = 0;
};

// dump_all's spelling of Ruby's types (ext/objspace's obj_type).
const char* TypeName(int type) {
  switch (type) {
    case RUBY_T_NONE: return "NONE";
    case RUBY_T_OBJECT: return "OBJECT";
    case RUBY_T_CLASS: return "CLASS";
    case RUBY_T_MODULE: return "MODULE";
    case RUBY_T_FLOAT: return "FLOAT";
    case RUBY_T_STRING: return "STRING";
    case RUBY_T_REGEXP: return "REGEXP";
    case RUBY_T_ARRAY: return "ARRAY";
    case RUBY_T_HASH: return "HASH";
    case RUBY_T_STRUCT: return "STRUCT";
    case RUBY_T_BIGNUM: return "BIGNUM";
    case RUBY_T_FILE: return "FILE";
    case RUBY_T_DATA: return "DATA";
    case RUBY_T_MATCH: return "MATCH";
    case RUBY_T_COMPLEX: return "COMPLEX";
    case RUBY_T_RATIONAL: return "RATIONAL";
    case RUBY_T_SYMBOL: return "SYMBOL";
    case RUBY_T_IMEMO: return "IMEMO";
    case RUBY_T_NODE: return "NODE";
    case RUBY_T_ICLASS: return "ICLASS";
    case RUBY_T_ZOMBIE: return "ZOMBIE";
    case RUBY_T_MOVED: return "MOVED";
    default: return nullptr;  // not a heap object's type: not written
  }
}

// Ruby's marking code calls these: they must not throw (NoThrow), and the
// writer's failures are sticky, checked once per page.
void RootCallback(const char* category, VALUE obj, void* data) {
  NoThrow("dump root callback", [&] {
    DumpState* d = static_cast<DumpState*>(data);
    d->writer->Root(category, static_cast<uint64_t>(obj));
    d->roots++;
  });
}

void ReferenceCallback(VALUE ref, void* data) {
  NoThrow("dump reference callback", [&] {
    DumpState* d = static_cast<DumpState*>(data);
    if (ref == d->klass) return;  // the class is "class", as in dump_all
    d->writer->Reference(static_cast<uint64_t>(ref));
  });
}

// The fields `fathom analyze` and dump_all's other readers use. Strings:
// "bytesize", and "value" only when asked for (a heap holds secrets).
void TypeFields(DumpState* d, VALUE obj, int type) {
  DumpWriter& w = *d->writer;
  switch (type) {
    case RUBY_T_STRING:
      w.Number("bytesize", static_cast<uint64_t>(RSTRING_LEN(obj)));
      if (d->values) w.String("value", std::string_view(RSTRING_PTR(obj), static_cast<size_t>(RSTRING_LEN(obj))));
      break;
    case RUBY_T_ARRAY:
      w.Number("length", static_cast<uint64_t>(RARRAY_LEN(obj)));
      break;
    case RUBY_T_HASH:
      w.Number("size", static_cast<uint64_t>(RHASH_SIZE(obj)));
      break;
    case RUBY_T_CLASS:
    case RUBY_T_MODULE: {
      if (RB_FL_TEST_RAW(obj, RUBY_FL_SINGLETON)) {
        w.True("singleton");
        break;
      }
      // The class's own path String (no allocation); nil when anonymous,
      // which dump_all also leaves unnamed.
      VALUE path = rb_class_path_cached(obj);
      if (RB_TYPE_P(path, T_STRING))
        w.String("name", std::string_view(RSTRING_PTR(path), static_cast<size_t>(RSTRING_LEN(path))));
      break;
    }
    case RUBY_T_DATA:
      if (RTYPEDDATA_P(obj) && RTYPEDDATA_TYPE(obj)->wrap_struct_name)
        w.String("struct", RTYPEDDATA_TYPE(obj)->wrap_struct_name);
      break;
    default:
      break;
  }
}

void DumpObject(DumpState* d, VALUE obj) {
  int type = RB_BUILTIN_TYPE(obj);
  const char* name = TypeName(type);
  if (!name) return;
  DumpWriter& w = *d->writer;
  w.BeginObject(static_cast<uint64_t>(obj), name);
  d->objects++;
  // A zombie (finalizer pending) or a moved slot has no references to
  // follow and no size of its own: its type line only, as in dump_all.
  if (type == RUBY_T_ZOMBIE || type == RUBY_T_MOVED || type == RUBY_T_NONE) {
    w.EndObject();
    return;
  }
  // An imemo's class slot holds other data (a method entry's owner, a
  // cref's flags). dump_all of Ruby 3.3 writes no class for it and keeps
  // all its references; 3.1's wrote the slot as "class" and left that
  // reference out (both seen). Each Ruby's own dump_all is followed, so a
  // dump and dump_all of one heap give the same graph.
  d->klass = kImemoHasNoClass && type == RUBY_T_IMEMO ? 0 : RBASIC_CLASS(obj);
  if (d->klass) w.Address("class", static_cast<uint64_t>(d->klass));
  if (RB_OBJ_FROZEN_RAW(obj)) w.True("frozen");
  TypeFields(d, obj, type);
  rb_objspace_reachable_objects_from(obj, ReferenceCallback, d);
  size_t memsize = rb_obj_memsize_of(obj);
  if (memsize > 0) w.Number("memsize", memsize);
  w.EndObject();
}

// One heap page: slots [start, end), stride bytes apart; a zero flags word
// is a free slot (dump_all's test). A nonzero return stops the walk.
int PageCallback(void* start, void* end, size_t stride, void* data) {
  return NoThrow("dump page callback", 1, [&] {
    DumpState* d = static_cast<DumpState*>(data);
    for (VALUE v = reinterpret_cast<VALUE>(start); v != reinterpret_cast<VALUE>(end); v += stride)
      if (RBASIC(v)->flags) DumpObject(d, v);
    return d->writer->ok() ? 0 : 1;
  });
}

// The child's whole life. Never returns.
[[noreturn]] void ChildMain(int result_fd, int out_fd, bool values, int gzip_level, uint64_t memory_bytes) {
  retention::BlockAllSignals();
  retention::LowerPriority();
  retention::LimitAddressSpace(memory_bytes);
  int code = 0;
  try {
    int64_t started = MonotonicNs();
    DumpWriter writer(out_fd, gzip_level);
    DumpState d{&writer, values, Qnil};
    if (writer.Start()) {
      // A Ruby exception raised in here must not longjmp to a tag of the
      // parent's frames copied into this image: Protect catches it.
      Protect([&] {
        rb_objspace_reachable_objects_from_root(RootCallback, &d);
        writer.EndRoots();
        rb_objspace_each_objects(PageCallback, &d);
      });
    }
    if (writer.Finish() && fsync(out_fd) != 0 && errno != EINVAL)
      throw std::runtime_error(std::string("fsync failed: ") + strerror(errno));
    if (!writer.ok()) throw std::runtime_error(writer.error());
    struct rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    int64_t v[kStatCount] = {static_cast<int64_t>(d.objects),     static_cast<int64_t>(d.roots),
                             static_cast<int64_t>(writer.lines()), static_cast<int64_t>(writer.bytes_written()),
                             MonotonicNs() - started,              static_cast<int64_t>(usage.ru_maxrss)};
    if (!retention::SendResult(result_fd, std::string(reinterpret_cast<const char*>(v), sizeof v))) code = 2;
  } catch (const std::exception& e) {
    retention::SendFailure(result_fd, e.what());
    code = 1;
  } catch (const RubyJump&) {
    retention::SendFailure(result_fd, "a Ruby exception was raised in the dump");
    code = 1;
  } catch (...) {
    retention::SendFailure(result_fd, "unknown failure");
    code = 1;
  }
  // No at_exit handler, no Ruby VM teardown, no atexit of any library.
  _exit(code);
}

struct ForkedDump {
  int64_t fork_ns = 0, wait_ns = 0;
  retention::ChildReport report;
};

// false: fork() itself failed (errno in *fork_errno), nothing ran.
bool RunForked(int out_fd, bool values, int gzip_level, int64_t timeout_ns, uint64_t memory_bytes, ForkedDump* r,
               int* fork_errno) {
  // rb_gc_disable finishes a lazy sweep first (free functions run here,
  // in the parent); the child inherits GC off and never turns it on.
  bool gc_was_disabled = RTEST(rb_gc_disable());
  ForkedChild child;
  bool forked = ForkAndCollect(
      "dump_fork_wait", timeout_ns, {out_fd},  // the file it writes: the one descriptor of the app's it keeps
      [&](int fd) { ChildMain(fd, out_fd, values, gzip_level, memory_bytes); },
      [&] {
        if (!gc_was_disabled) rb_gc_enable();
      },
      &child, fork_errno);
  r->fork_ns = child.fork_ns;
  if (!forked) return false;
  r->report = std::move(child.report);
  r->wait_ns = r->report.wait_ns;
  return true;
}

// heap_dump_forked(fd, values, gzip_level, timeout_seconds, memory_bytes)
// -> Hash of counts and times. fd: an open, empty file the child writes (the caller renames
// it). Raises Fathom::Error when the child failed or ran past the timeout
// (it is killed and reaped) or fork() failed, NotImplementedError where Ruby lacks the
// walk's functions.
VALUE NativeHeapDumpForked(VALUE, VALUE fd, VALUE values, VALUE gzip_level, VALUE timeout, VALUE memory) {
  return RubyMethod([&] {
    if (!kDumpAvailable)
      throw RubyError(rb_eNotImpError,
                      "fathom: this Ruby does not export rb_objspace_each_objects and "
                      "rb_objspace_reachable_objects_from; heap dumps are unavailable");
    if (!RB_FIXNUM_P(fd) || FIX2LONG(fd) < 0) ThrowTypeError("fathom: fd must be a file descriptor (Integer)");
    if (values != Qtrue && values != Qfalse) ThrowTypeError("fathom: values must be true or false");
    if (!RB_FIXNUM_P(gzip_level) || FIX2LONG(gzip_level) < -1 || FIX2LONG(gzip_level) > 9)
      ThrowArgumentError("fathom: gzip level must be -1..9");
    if (!RB_FLOAT_TYPE_P(timeout) && !RB_INTEGER_TYPE_P(timeout)) ThrowTypeError("fathom: timeout must be a number");
    double timeout_s = NUM2DBL(timeout);
    if (!(timeout_s > 0 && timeout_s <= 86400))
      ThrowArgumentError("fathom: timeout must be between 0 and 86400 seconds, got %g", timeout_s);
    if (!RB_INTEGER_TYPE_P(memory)) ThrowTypeError("fathom: memory must be an Integer");
    uint64_t memory_bytes = NUM2ULL(memory);
    if (g_dump_in_progress) ThrowFathomError("fathom: another heap dump is in progress in this process");
    g_dump_in_progress = true;
    ForkedDump r;
    int fork_errno = 0;
    bool forked = false;
    try {
      forked = RunForked(static_cast<int>(FIX2LONG(fd)), values == Qtrue, static_cast<int>(FIX2LONG(gzip_level)),
                         static_cast<int64_t>(timeout_s * 1e9), memory_bytes, &r, &fork_errno);
    } catch (...) {
      g_dump_in_progress = false;
      throw;
    }
    g_dump_in_progress = false;
    if (!forked)
      ThrowFathomError("fathom: fork() failed (%s): no heap dump written (ObjectSpace.dump_all writes one in-process)",
                       strerror(fork_errno));
    if (r.report.outcome != retention::ChildReport::kOk)
      ThrowFathomError("fathom: the forked heap dump failed: %s", r.report.error.c_str());
    if (r.report.bytes.size() != kStatCount * sizeof(int64_t))
      ThrowFathomError("fathom: the forked heap dump sent a result of %zu bytes", r.report.bytes.size());
    int64_t v[kStatCount];
    memcpy(v, r.report.bytes.data(), sizeof v);
    VALUE h = rb_hash_new();
    auto set = [h](const char* key, long long n) { rb_hash_aset(h, ID2SYM(rb_intern(key)), LL2NUM(n)); };
    set("objects", v[0]);
    set("roots", v[1]);
    set("lines", v[2]);
    set("bytes", v[3]);
    set("child_ns", v[4]);
    set("child_maxrss_kb", v[5]);
    set("fork_ns", r.fork_ns);
    set("wait_ns", r.wait_ns);
    return h;
  });
}

}  // namespace

void InitForkedDump(VALUE mNative) {
  ResetInForkedChild([] { g_dump_in_progress = false; });
  // The function itself, not RUBY_METHOD_FUNC(...): Ruby's C++ headers
  // check its arity from its type, where the ANYARGS cast drew Ruby 3.1's
  // "use of ANYARGS is deprecated" warning.
  rb_define_module_function(mNative, "heap_dump_forked", NativeHeapDumpForked, 5);
}

}  // namespace fathom
