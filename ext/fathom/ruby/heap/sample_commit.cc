// Commit of pending records (a postponed job, or the start of a flush or a
// stop): the object is built by now and Ruby may be called, so this is
// where a sample gets its class and thread labels (cached per GC epoch),
// its size, and (SampleStore::Commit) its liveness token.
#include <string>

#include "base/clock.h"
#include "ruby/runtime/boundary.h"
#include "ruby/heap/heap_collector.h"
#include "ruby/runtime/ruby_private_api.h"

namespace fathom {
namespace {

ID id_name, id_native_thread_id;

uint32_t ClassLabelUncached(HeapCollector* c, VALUE klass) {
  klass = rb_class_real(klass);
  VALUE path = klass ? rb_class_path_cached(klass) : Qnil;
  if (NIL_P(path) && klass) path = rb_class_name(klass);  // anonymous: "#<Class:0x...>"
  if (!RB_TYPE_P(path, T_STRING)) return c->store.labels().Intern("<unknown>");
  return c->store.labels().Intern(std::string_view(RSTRING_PTR(path), static_cast<size_t>(RSTRING_LEN(path))));
}

uint32_t ClassLabel(HeapCollector* c, VALUE obj, bool* trackable) {
  *trackable = true;
  switch (RB_BUILTIN_TYPE(obj)) {
    // Internal objects: their klass slot is not a class (imemo keeps data
    // there) and they cannot be tracked (no object_id, not WeakMap keys).
    case RUBY_T_IMEMO: *trackable = false; return c->store.labels().Intern("<internal:imemo>");
    case RUBY_T_ICLASS: *trackable = false; return c->store.labels().Intern("<internal:iclass>");
    default: break;
  }
  VALUE klass = RBASIC_CLASS(obj);
  if (!klass) {
    // Hidden objects (internal buffers): no class to report, and Ruby may
    // reveal or reuse them in ways a liveness token should not outlive.
    *trackable = false;
    return c->store.labels().Intern("<internal:hidden>");
  }
  if (klass == c->commit.last_class) return c->commit.last_class_label;
  auto it = c->commit.class_labels.find(klass);
  uint32_t label = it != c->commit.class_labels.end() ? it->second : ClassLabelUncached(c, klass);
  if (it == c->commit.class_labels.end()) c->commit.class_labels.emplace(klass, label);
  c->commit.last_class = klass;
  c->commit.last_class_label = label;
  return label;
}

// Ruby methods the labels have called, for CommitPending's clock: during a
// call Ruby may switch threads.
uint64_t g_label_ruby_calls = 0;

// thread.method() where an exception (a monkey-patched Thread#name, say)
// must not escape from a postponed job into the application: nil instead.
VALUE CallOrNil(VALUE thread, ID method) {
  g_label_ruby_calls++;
  VALUE result = Qnil;
  if (!TryProtect([&] { result = rb_funcall(thread, method, 0); })) return Qnil;
  return result;
}

uint32_t ThreadLabelUncached(HeapCollector* c, VALUE thread, bool* named) {
  *named = true;
  if (thread == rb_thread_main()) return c->store.labels().Intern("main");
  VALUE name = CallOrNil(thread, id_name);
  if (RB_TYPE_P(name, T_STRING))
    return c->store.labels().Intern(std::string_view(RSTRING_PTR(name), static_cast<size_t>(RSTRING_LEN(name))));
  *named = false;
  VALUE tid = CallOrNil(thread, id_native_thread_id);
  std::string label = "thread " + (RB_INTEGER_TYPE_P(tid) ? std::to_string(NUM2LL(tid)) : std::string("?"));
  return c->store.labels().Intern(label);
}

uint32_t ThreadLabel(HeapCollector* c, VALUE thread) {
  if (thread == c->commit.last_thread) return c->commit.last_thread_label;
  auto it = c->commit.thread_labels.find(thread);
  bool named = false;
  uint32_t label = it != c->commit.thread_labels.end() ? it->second : ThreadLabelUncached(c, thread, &named);
  // Unnamed threads are not cached: they often get a name right after
  // starting (Thread.current.name = ...), after their first allocation.
  if (it == c->commit.thread_labels.end() && !named) return label;
  if (it == c->commit.thread_labels.end()) c->commit.thread_labels.emplace(thread, label);
  c->commit.last_thread = thread;
  c->commit.last_thread_label = label;
  return label;
}

bool SafeForMemsize(VALUE obj) {
  switch (RB_BUILTIN_TYPE(obj)) {
    case RUBY_T_NONE:
    case RUBY_T_ZOMBIE:
    case RUBY_T_MOVED:
    case RUBY_T_NODE:  // crashed rb_obj_memsize_of on some Rubies (dd-trace-rb)
      return false;
    default:
      return true;
  }
}

// Clears `committing` however CommitPending is left (a C++ exception,
// including a Ruby exit turned into RubyJump by TryProtect).
struct CommittingScope {
  explicit CommittingScope(HeapCollector* c) : c_(c) { c_->commit.committing = true; }
  ~CommittingScope() { c_->commit.committing = false; }
  CommittingScope(const CommittingScope&) = delete;
  CommittingScope& operator=(const CommittingScope&) = delete;
  HeapCollector* c_;
};

// Keeps the candidate with probability min(1, bytes / threshold), scaling
// its weight by 1/p (Horvitz-Thompson: unbiased), or drops it.
bool ThinCandidate(HeapCollector* c, uint32_t index, uint64_t bytes) {
  double p = c->commit.thinning.KeepProbability(bytes);
  if (p < 1.0) {
    // minstd_rand's 31 random bits are plenty for a keep probability.
    auto uniform = [c] { return static_cast<double>(c->rng() - c->rng.min()) / (c->rng.max() - c->rng.min() + 1.0); };
    if (uniform() >= p) {
      c->store.DropPending(index);
      c->commit.thinned++;
      return false;
    }
    c->store.SetWeight(index, ByteThinning::ScaledWeight(c->store.at(index).weight, p, uniform()));
  }
  return true;
}

void CommitJob(void*) {
  NoThrow("commit job", [] {
    if (g_active) CommitPending(g_active);
  });
}

}  // namespace

PostponedJob g_commit_job(CommitJob);

size_t MemsizeOf(VALUE obj) {
#ifdef HAVE_RB_OBJ_MEMSIZE_OF
  if (SafeForMemsize(obj)) return rb_obj_memsize_of(obj);
#endif
  return sizeof(VALUE) * 5;  // one heap slot
}

// GVL held; does not yield on purpose, but see below.
void CommitPending(HeapCollector* c) {
  c->window.drained_freed += c->store.DrainFreed();
  if (c->commit.committing || c->store.pending().empty()) return;
  CommittingScope committing(c);
  BusyScope busy(c);  // our own allocations below are not sampled
  size_t gc_count = rb_gc_count();
  if (gc_count != c->commit.label_cache_gc_count) {
    c->commit.class_labels.clear();
    c->commit.thread_labels.clear();
    c->commit.last_class = c->commit.last_thread = Qundef;
    c->commit.label_cache_gc_count = gc_count;
  }
  // Naming a thread or a class calls Ruby methods, and Ruby may switch
  // threads at a method call: other threads' hooks then append to `pending`
  // and to the record vector (which may move). So records are taken by
  // index, no reference is held across a Ruby call, and an index stays in
  // `pending` (where the mark function keeps its object alive and pinned)
  // until its commit is complete. Records appended meanwhile are committed
  // by this same loop. A commit cut short by an exception leaves the rest
  // pending for the next one; records already committed are skipped then.
  //
  // The commit time is read once per run of records that calls no Ruby
  // method, not once per record: a clock read is ~26 ns here (kvm-clock's
  // vDSO), a sixth of what exact mode adds to an allocation, and a run
  // commits in microseconds. Naming a thread calls Ruby (Thread#name), where
  // another thread can run for a time slice, so the clock is read again
  // after such a call. Sampled mode commits a few records a tick and tracks
  // each (WeakMap#[]=, a Ruby call): it reads it per record.
  const std::vector<uint32_t>& pending = c->store.pending();
  int64_t now_ns = MonotonicNs();
  uint64_t ruby_calls = g_label_ruby_calls;
  for (size_t k = 0; k < pending.size(); k++) {
    uint32_t index = pending[k];
    if (c->store.at(index).state != RecordState::kPending) continue;
    FATHOM_FAULT_POINT("commit_pending");
    VALUE obj = static_cast<VALUE>(c->store.at(index).object);
    VALUE thread = static_cast<VALUE>(c->store.at(index).thread);
    CommitInfo info;
    info.alloc_bytes = MemsizeOf(obj);
    // Thinning by bytes: decided before anything that calls Ruby, and
    // before the liveness token, the cost it exists to save.
    if (!c->exact && !ThinCandidate(c, index, info.alloc_bytes)) continue;
    bool trackable;
    info.class_label = ClassLabel(c, obj, &trackable);
    info.thread_label = ThreadLabel(c, thread);
    if (!c->exact || ruby_calls != g_label_ruby_calls) {
      now_ns = MonotonicNs();
      ruby_calls = g_label_ruby_calls;
    }
    info.time_ns = now_ns;
    // Tracking may call Ruby (WeakMap#[]=): the loop above holds no reference.
    if (!c->exact && trackable) info.liveness_token = c->tokens.Track(obj);
    if (!c->store.Commit(index, info)) c->commit.untracked++;
    c->commit.commits++;
  }
  c->store.ClearPending();
}

void InitSampleCommit() {
  id_name = rb_intern("name");
  id_native_thread_id = rb_intern("native_thread_id");
  g_commit_job.Preregister();
}

}  // namespace fathom
