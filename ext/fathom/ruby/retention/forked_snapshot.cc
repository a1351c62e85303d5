// A retention snapshot walked in a forked child, on a copy-on-write image
// of the heap: the app holds still only for fork() (and for collecting
// thread names before it). Why fork() and not _Fork(), and what in the
// child could touch state another thread held at fork time:
// docs/internals/retention.md, "Forked snapshots".
//
// Parent (GVL held, GC disabled by take_forked): fork. Child: die with the
// parent, close every descriptor but its pipe (ForkAndCollect), block every
// signal, bound its address space, then walk, name (no Ruby method call:
// prepared names), compute dominators and encode, exactly the in-process
// code, send the profile and its stats through a pipe, _exit. Parent: GC
// back on at once, then wait for the child without the GVL (a Thread#kill
// or Interrupt kills the child), always reaping it.
#include <fcntl.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <cstring>
#include <string>

#include "base/clock.h"
#include "io/child_process.h"
#include "ruby/fork/forked_child.h"
#include "ruby/retention/retention_snapshot.h"
#include "ruby/runtime/boundary.h"

namespace fathom {
namespace retention {
namespace {

// The stats the child sends before the profile, in this order.
constexpr int kStatCount = 19;

void PutStats(const Snapshot* s, int64_t child_ns, int64_t maxrss_kb, std::string* out) {
  int64_t v[kStatCount] = {static_cast<int64_t>(s->objects),
                           static_cast<int64_t>(s->edge_count),
                           static_cast<int64_t>(s->root_categories),
                           s->walk_ns,
                           s->name_ns,
                           s->analyze_ns,
                           s->encode_ns,
                           static_cast<int64_t>(s->graph_bytes),
                           static_cast<int64_t>(s->peak_bytes),
                           static_cast<int64_t>(s->dominator_peak_bytes),
                           static_cast<int64_t>(s->own_objects),
                           static_cast<int64_t>(s->own_bytes),
                           static_cast<int64_t>(s->own_edges_dropped),
                           static_cast<int64_t>(s->internal_objects),
                           static_cast<int64_t>(s->internal_bytes),
                           static_cast<int64_t>(s->internals_extended),
                           child_ns,
                           maxrss_kb,
                           static_cast<int64_t>(s->idom.capacity() * 4 + s->retained.capacity() * 8)};
  out->append(reinterpret_cast<const char*>(v), sizeof v);
}

void GetStats(Snapshot* s, const std::string& in) {
  int64_t v[kStatCount];
  memcpy(v, in.data(), sizeof v);
  s->objects = static_cast<size_t>(v[0]);
  s->edge_count = static_cast<size_t>(v[1]);
  s->root_categories = static_cast<size_t>(v[2]);
  s->walk_ns = v[3];
  s->name_ns = v[4];
  s->analyze_ns = v[5];
  s->encode_ns = v[6];
  s->graph_bytes = static_cast<size_t>(v[7]);
  s->peak_bytes = static_cast<size_t>(v[8]);
  s->dominator_peak_bytes = static_cast<size_t>(v[9]);
  s->own_objects = static_cast<size_t>(v[10]);
  s->own_bytes = static_cast<uint64_t>(v[11]);
  s->own_edges_dropped = static_cast<size_t>(v[12]);
  s->internal_objects = static_cast<size_t>(v[13]);
  s->internal_bytes = static_cast<uint64_t>(v[14]);
  s->internals_extended = static_cast<size_t>(v[15]);
  s->child_ns = v[16];
  // v[17]: the child's peak RSS (kB), v[18]: its dominator arrays: kept
  // for a future stat, not shown.
}

// Everything the child computes. May throw (a C++ failure, or a Ruby
// exception carried out of Protect as RubyJump).
void ChildWork(Snapshot* s, RetentionProfileOptions* options, std::string* out) {
  int64_t started = MonotonicNs();
  BuildGraph(s, Qnil);
  int64_t t1 = MonotonicNs();
  NameEdges(s);  // s->forked: no Ruby method is called
  s->name_ns = MonotonicNs() - t1;
  s->graph_pins = false;
  AnalyzeGraph(s);  // no GVL to release here: nothing else runs in this process
  options->duration_nanos = s->walk_ns + s->name_ns;
  int64_t t2 = MonotonicNs();
  RetentionProfileStats encode_stats;
  std::string bytes = EncodeRetentionProfile(s->graph, s->idom, s->retained, *options, &encode_stats);
  s->encode_ns = MonotonicNs() - t2;
  s->internal_objects = encode_stats.internal_objects;
  s->internal_bytes = encode_stats.internal_bytes;
  struct rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  PutStats(s, MonotonicNs() - started, usage.ru_maxrss, out);
  out->append(bytes);
}

// The child's whole life. Never returns.
[[noreturn]] void ChildMain(Snapshot* s, int fd, RetentionProfileOptions options, uint64_t memory_bytes) {
  BlockAllSignals();
  LowerPriority();
  LimitAddressSpace(memory_bytes);
  s->forked = true;
  s->progress = Qnil;  // progress lines would write to an IO: a Ruby call
  // GC stays disabled in this image (the parent disabled it before fork)
  // and is never turned on here: EnableGcAgain must do nothing.
  s->gc_disabled_here = false;
  int code = 0;
  std::string out;
  try {
    // A Ruby exception raised in the walk must not longjmp to a tag of the
    // parent's frames copied into this image (that would run the parent's
    // Ruby code here): Protect catches it.
    Protect([&] { ChildWork(s, &options, &out); });
    if (!SendResult(fd, out)) code = 2;
  } catch (const std::exception& e) {
    SendFailure(fd, e.what());
    code = 1;
  } catch (const RubyJump&) {
    SendFailure(fd, "a Ruby exception was raised in the walk");
    code = 1;
  } catch (...) {
    SendFailure(fd, "unknown failure");
    code = 1;
  }
  // No at_exit handler, no Ruby VM teardown, no atexit of any library, no
  // stdio flush of buffers copied from the parent.
  _exit(code);
}

}  // namespace

bool TakeForked(Snapshot* s, const RetentionProfileOptions& options, int64_t timeout_ns, uint64_t memory_bytes,
                int* fork_errno) {
  ForkedChild child;
  bool forked = ForkAndCollect(
      "retention_fork_wait", timeout_ns, {}, [&](int fd) { ChildMain(s, fd, options, memory_bytes); },
      [&] { EnableGcAgain(s); },  // the parent runs on with GC as it was
      &child, fork_errno);
  s->fork_ns = child.fork_ns;
  if (!forked) return false;
  const ChildReport& report = child.report;
  s->wait_ns = report.wait_ns;
  if (report.outcome != ChildReport::kOk)
    ThrowFathomError("fathom: the forked retention snapshot failed: %s (pass fork: false to walk in-process)",
                     report.error.c_str());
  if (report.bytes.size() < kStatCount * sizeof(int64_t))
    ThrowFathomError("fathom: the forked retention snapshot sent a short result (%zu bytes)", report.bytes.size());
  GetStats(s, report.bytes);
  s->forked_bytes.assign(report.bytes, kStatCount * sizeof(int64_t), std::string::npos);
  s->forked_done = true;
  return true;
}

}  // namespace retention
}  // namespace fathom
