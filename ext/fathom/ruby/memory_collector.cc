// Fathom::Native::MemoryCollector — allocation sampling and live-heap
// tracking. This file owns every Ruby hook of the memory profiler.
//
// Life of a sample (details and the Ruby versions each path applies to are in
// IMPLEMENTATION.md):
//
//  1. Arming. Sampled mode: the SampleTimer gets ArmJob run at a safe point
//     on the GVL holder every interval; ArmJob installs the NEWOBJ hook.
//     Exact mode: the NEWOBJ and FREEOBJ hooks are installed for the whole run.
//  2. NewobjHook (inside Ruby's allocator: must not allocate Ruby objects,
//     raise, or look inside the half-built object). Sampled mode skips a
//     small random number of allocations, then takes one and removes itself.
//     It captures the stack with rb_profile_frames into preallocated
//     buffers, interns it (plain C++ memory), records the object, thread and
//     weight as a *pending* record and registers CommitJob.
//  3. CommitJob (postponed job: GVL held, allocation allowed, the object is
//     built by now). Pending objects are kept alive and pinned by our mark
//     function until this point. It measures the size (rb_obj_memsize_of),
//     names the class and thread, and attaches the liveness token: exact
//     mode indexes the object for FreeobjHook; sampled mode takes the
//     object's object_id, which Ruby retires when the object dies and
//     carries across GC compaction.
//  4. Flush (GVL, yielded periodically): walks records, decides liveness
//     (exact: FREEOBJ seen or not; sampled: ObjectSpace._id2ref(id) still
//     answers), measures live sizes, aggregates per stack/class/thread,
//     symbolizes frames, then encodes and gzips without the GVL.
#include "memory_collector.h"

#include <ruby/debug.h>
#include <ruby/thread.h>
#include <time.h>

#include <algorithm>
#include <memory>
#include <random>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/clock.h"
#include "frame_symbolizer.h"
#include "heap/heap_profile.h"
#include "ruby_private_api.h"
#include "heap/sample_store.h"
#include "sample_timer.h"

namespace fathom {
namespace {

VALUE cMemoryCollector = Qnil;
VALUE eFathomError = Qnil;
ID id_id2ref, id_name, id_native_thread_id, id_list;
VALUE sym_total_allocated_objects = Qnil;
VALUE mObjectSpace = Qnil;

// After each tick, sampled mode lets a random 0..kMaxRandomSkip allocations
// pass before taking one. A tick tends to land in the gap before an
// allocation burst, so taking the very first allocation after it favours
// allocations that follow slow code. Measured on examples/leaky_app.rb
// (in-use bytes, 6 runs each, exact mode = 100%): skip 0..16 read +25%,
// skip 0..128 read -4%. Costs on average 64 hook calls per tick.
constexpr uint32_t kMaxRandomSkip = 128;
// Sampled mode yields the GVL during a flush after holding it this long.
constexpr int64_t kMaxGvlHoldNs = 2000000;  // 2 ms
constexpr int kMaxDepthLimit = 4096;
// Exact mode commits pending records in batches of this many: one postponed
// job per allocation would double the per-allocation cost. Pending objects
// are pinned until committed, so this also bounds what we keep alive.
constexpr size_t kExactCommitBatch = 256;

struct Collector {
  // Configuration (immutable after initialize).
  bool exact = false;
  uint64_t interval_ns = 0;
  int max_depth = 0;

  bool running = false;
  bool flushing = false;
  // Exact mode after stop: FREEOBJ was no longer watched for these records,
  // so they can no longer be called live.
  bool liveness_lost = false;
  SampleStore store;

  // Capture buffers, sized at start so the hook never allocates them.
  std::vector<VALUE> frames;
  std::vector<int> lines;
  std::vector<uint64_t> handles;

  // Sampled-mode state.
  size_t last_total_allocated = 0;
  uint32_t skip_countdown = 0;
  std::minstd_rand rng;

  // The thread doing profiler work (commit, flush): its allocations are the
  // profiler's own and are not sampled.
  VALUE busy_thread = Qnil;
  int busy_depth = 0;

  // Class and thread labels by VALUE. Valid for one GC epoch only: a class
  // or thread can only be freed (and its address reused) by a GC.
  size_t label_cache_gc_count = SIZE_MAX;
  std::unordered_map<VALUE, uint32_t> class_labels;
  std::unordered_map<VALUE, uint32_t> thread_labels;
  // One-entry caches in front of the maps: allocation runs repeat the class.
  VALUE last_class = Qundef, last_thread = Qundef;
  uint32_t last_class_label = 0, last_thread_label = 0;

  // The window the next flush describes.
  int64_t window_start_realtime_ns = 0;
  int64_t window_start_mono_ns = 0;

  // Counters.
  uint64_t samples_taken = 0;
  uint64_t commits = 0;
  uint64_t untracked = 0;
  uint64_t flushes = 0;
  uint64_t drained_since_flush = 0;  // freed records folded into totals
  bool committing = false;           // CommitPending is not re-entrant
};

// The running collector. Hooks are process-global, so there is at most one;
// it is also registered as a GC root so it cannot be freed while hooked.
Collector* g_active = nullptr;
VALUE g_active_self = Qnil;
// The exact-mode collector whose FREEOBJ hook is installed. It can outlive
// stop() until a flush drains its records (see Stop).
Collector* g_freeobj_owner = nullptr;
VALUE g_freeobj_owner_self = Qnil;

class BusyScope {
 public:
  explicit BusyScope(Collector* c) : c_(c) {
    if (c_->busy_depth++ == 0) c_->busy_thread = rb_thread_current();
  }
  ~BusyScope() {
    if (--c_->busy_depth == 0) c_->busy_thread = Qnil;
  }

 private:
  Collector* c_;
};

bool IsOwnAllocation(Collector* c) { return c->busy_depth > 0 && rb_thread_current() == c->busy_thread; }

// ---------------------------------------------------------------- hooks

void CommitJob(void*);

void RemoveNewobjHook();

// RUBY_INTERNAL_EVENT_NEWOBJ. Runs inside the allocator.
void NewobjHook(VALUE, void* trace_arg) {
  Collector* c = g_active;
  if (!c || IsOwnAllocation(c)) return;
  if (!c->exact && c->skip_countdown > 0) {
    c->skip_countdown--;
    return;
  }
  VALUE obj = rb_tracearg_object(static_cast<rb_trace_arg_t*>(trace_arg));

  uint64_t weight = 1;
  if (!c->exact) {
    // The sample stands for every allocation since the previous sample, so
    // the weights add up to the exact allocation count. rb_gc_stat with a
    // Symbol key reads a counter; it does not allocate.
    size_t total = rb_gc_stat(sym_total_allocated_objects);
    weight = total > c->last_total_allocated ? total - c->last_total_allocated : 1;
    c->last_total_allocated = total;
    RemoveNewobjHook();
    SampleTimer::hook_armed.store(false);
  }

  int depth = rb_profile_frames(0, c->max_depth + 1, c->frames.data(), c->lines.data());
  bool truncated = depth > c->max_depth;
  if (truncated) depth = c->max_depth;
  for (int i = 0; i < depth; i++) c->handles[i] = static_cast<uint64_t>(c->frames[i]);

  SampleRecord record;
  record.object = static_cast<uint64_t>(obj);
  record.thread = static_cast<uint64_t>(rb_thread_current());
  record.weight = weight;
  record.stack_id = c->store.stacks().Intern(c->handles.data(), c->lines.data(), static_cast<size_t>(depth), truncated);
  c->store.AddPending(record);
  c->samples_taken++;
  if (!c->exact || c->store.pending().size() >= kExactCommitBatch) rb_postponed_job_register_one(0, CommitJob, nullptr);
}

// RUBY_INTERNAL_EVENT_FREEOBJ (exact mode only). Runs during GC sweep: only
// a tombstone write in ObjectMap and a state change, no allocation.
void FreeobjHook(VALUE, void* trace_arg) {
  Collector* c = g_freeobj_owner;
  if (!c) return;
  VALUE obj = rb_tracearg_object(static_cast<rb_trace_arg_t*>(trace_arg));
  uint32_t index = c->store.live_objects().Erase(static_cast<uint64_t>(obj));
  if (index != ObjectMap::kNotFound) c->store.MarkFreed(index);
}

// Hooks added with RUBY_EVENT_HOOK_FLAG_RAW_ARG are called as
// func(data, rb_trace_arg_t*), though the API types them as
// rb_event_hook_func_t; the detour through void(*)() is the sanctioned way
// to say so to the compiler.
template <typename F>
rb_event_hook_func_t AsHookFunc(F* f) {
  return reinterpret_cast<rb_event_hook_func_t>(reinterpret_cast<void (*)()>(f));
}

constexpr rb_event_hook_flag_t kRawHookFlags =
    static_cast<rb_event_hook_flag_t>(RUBY_EVENT_HOOK_FLAG_SAFE | RUBY_EVENT_HOOK_FLAG_RAW_ARG);

void AddNewobjHook() {
  rb_add_event_hook2(AsHookFunc(NewobjHook), RUBY_INTERNAL_EVENT_NEWOBJ, Qnil,
                     kRawHookFlags);
}
void RemoveNewobjHook() { rb_remove_event_hook(AsHookFunc(NewobjHook)); }
void AddFreeobjHook() {
  rb_add_event_hook2(AsHookFunc(FreeobjHook), RUBY_INTERNAL_EVENT_FREEOBJ, Qnil,
                     kRawHookFlags);
}
void RemoveFreeobjHook() { rb_remove_event_hook(AsHookFunc(FreeobjHook)); }

// Sampled mode: the SampleTimer's job. Runs at a safe point with the GVL.
void ArmJob(void*) {
  SampleTimer::JobRan();
  Collector* c = g_active;
  if (!c || c->exact || !c->running || SampleTimer::hook_armed.load()) return;
  c->skip_countdown = static_cast<uint32_t>(c->rng() % (kMaxRandomSkip + 1));
  SampleTimer::hook_armed.store(true);
  AddNewobjHook();
}

// THREAD_BEGIN / THREAD_END run on the thread itself: that is how the timer
// learns the native ids of threads created after start.
void ThreadBeginHook(rb_event_flag_t, VALUE, VALUE, ID, VALUE) { SampleTimer::AddThread(CurrentTid()); }
void ThreadEndHook(rb_event_flag_t, VALUE, VALUE, ID, VALUE) { SampleTimer::RemoveThread(CurrentTid()); }

// ---------------------------------------------------------------- commit

uint32_t ClassLabelUncached(Collector* c, VALUE klass);

uint32_t ClassLabel(Collector* c, VALUE obj, bool* trackable) {
  *trackable = true;
  switch (RB_BUILTIN_TYPE(obj)) {
    // Internal objects: their klass slot is not a class (imemo keeps data
    // there) and object_id is meaningless for them.
    case RUBY_T_IMEMO: *trackable = false; return c->store.labels().Intern("<internal:imemo>");
    case RUBY_T_ICLASS: *trackable = false; return c->store.labels().Intern("<internal:iclass>");
    default: break;
  }
  VALUE klass = RBASIC_CLASS(obj);
  if (!klass) {
    // Hidden objects (internal buffers): no class to report, and Ruby may
    // reveal or reuse them in ways an object_id should not outlive.
    *trackable = false;
    return c->store.labels().Intern("<internal:hidden>");
  }
  if (klass == c->last_class) return c->last_class_label;
  auto it = c->class_labels.find(klass);
  uint32_t label = it != c->class_labels.end() ? it->second : ClassLabelUncached(c, klass);
  if (it == c->class_labels.end()) c->class_labels.emplace(klass, label);
  c->last_class = klass;
  c->last_class_label = label;
  return label;
}

uint32_t ClassLabelUncached(Collector* c, VALUE klass) {
  klass = rb_class_real(klass);
  VALUE path = klass ? rb_class_path_cached(klass) : Qnil;
  if (NIL_P(path) && klass) path = rb_class_name(klass);  // anonymous: "#<Class:0x...>"
  if (!RB_TYPE_P(path, T_STRING)) return c->store.labels().Intern("<unknown>");
  return c->store.labels().Intern(std::string_view(RSTRING_PTR(path), static_cast<size_t>(RSTRING_LEN(path))));
}

uint32_t ThreadLabelUncached(Collector* c, VALUE thread, bool* named);

// recv.method() where an exception (a monkey-patched Thread#name, say) must
// not escape from a postponed job into the application: nil instead.
VALUE CallProtected(VALUE recv, ID method) {
  VALUE args[2] = {recv, static_cast<VALUE>(method)};
  int state = 0;
  VALUE result = rb_protect(
      [](VALUE a) {
        const VALUE* v = reinterpret_cast<const VALUE*>(a);
        return rb_funcall(v[0], static_cast<ID>(v[1]), 0);
      },
      reinterpret_cast<VALUE>(args), &state);
  if (state) {
    rb_set_errinfo(Qnil);
    return Qnil;
  }
  return result;
}

uint32_t ThreadLabel(Collector* c, VALUE thread) {
  if (thread == c->last_thread) return c->last_thread_label;
  auto it = c->thread_labels.find(thread);
  bool named = false;
  uint32_t label = it != c->thread_labels.end() ? it->second : ThreadLabelUncached(c, thread, &named);
  // Unnamed threads are not cached: they often get a name right after
  // starting (Thread.current.name = ...), after their first allocation.
  if (it == c->thread_labels.end() && !named) return label;
  if (it == c->thread_labels.end()) c->thread_labels.emplace(thread, label);
  c->last_thread = thread;
  c->last_thread_label = label;
  return label;
}

uint32_t ThreadLabelUncached(Collector* c, VALUE thread, bool* named) {
  *named = true;
  if (thread == rb_thread_main()) return c->store.labels().Intern("main");
  VALUE name = CallProtected(thread, id_name);
  if (RB_TYPE_P(name, T_STRING))
    return c->store.labels().Intern(std::string_view(RSTRING_PTR(name), static_cast<size_t>(RSTRING_LEN(name))));
  *named = false;
  VALUE tid = CallProtected(thread, id_native_thread_id);
  std::string label = "thread " + (RB_INTEGER_TYPE_P(tid) ? std::to_string(NUM2LL(tid)) : std::string("?"));
  return c->store.labels().Intern(label);
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

size_t MemsizeOf(VALUE obj) {
#ifdef HAVE_RB_OBJ_MEMSIZE_OF
  if (SafeForMemsize(obj)) return rb_obj_memsize_of(obj);
#endif
  return sizeof(VALUE) * 5;  // one heap slot
}

// Turns pending records into live ones, and folds freed ones into totals.
// GVL held; does not yield on purpose, but see below.
void CommitPending(Collector* c) {
  c->drained_since_flush += c->store.DrainFreed();
  if (c->committing || c->store.pending().empty()) return;
  c->committing = true;
  BusyScope busy(c);  // our own allocations below are not sampled
  size_t gc_count = rb_gc_count();
  if (gc_count != c->label_cache_gc_count) {
    c->class_labels.clear();
    c->thread_labels.clear();
    c->last_class = c->last_thread = Qundef;
    c->label_cache_gc_count = gc_count;
  }
  // Naming a thread or a class calls Ruby methods, and Ruby may switch
  // threads at a method call: other threads' hooks then append to `pending`
  // and to the record vector (which may move). So records are taken by
  // index, no reference is held across a Ruby call, and an index stays in
  // `pending` (where the mark function keeps its object alive and pinned)
  // until its commit is complete. Records appended meanwhile are committed
  // by this same loop.
  std::vector<uint32_t>& pending = c->store.pending();
  for (size_t k = 0; k < pending.size(); k++) {
    uint32_t index = pending[k];
    VALUE obj = static_cast<VALUE>(c->store.at(index).object);
    VALUE thread = static_cast<VALUE>(c->store.at(index).thread);
    bool trackable;
    uint32_t class_label = ClassLabel(c, obj, &trackable);
    uint32_t thread_label = ThreadLabel(c, thread);
    uint64_t alloc_bytes = MemsizeOf(obj);
    uint64_t object_id = 0;
    if (!c->exact && trackable) object_id = NUM2ULL(rb_obj_id(obj));  // no method call: no switch

    SampleRecord& r = c->store.at(index);
    r.class_label = class_label;
    r.thread_label = thread_label;
    r.alloc_bytes = alloc_bytes;
    r.thread = 0;
    if (c->exact) {
      c->store.live_objects().Insert(r.object, index);
    } else {
      r.object = 0;
      r.object_id = object_id;
      if (!trackable) c->untracked++;
    }
    r.state = RecordState::kLive;
    c->commits++;
  }
  pending.clear();
  c->committing = false;
}

void CommitJob(void*) {
  if (g_active) CommitPending(g_active);
}

// ---------------------------------------------------------------- GC glue

void CollectorMark(void* ptr) {
  Collector* c = static_cast<Collector*>(ptr);
  // Each distinct frame once, however many samples share it.
  c->store.stacks().ForEachFrameHandle([](uint64_t h) { rb_gc_mark_movable(static_cast<VALUE>(h)); });
  // Pending objects must survive (and not move) until CommitJob has looked
  // at them; they are strong references only for that short while.
  for (uint32_t index : c->store.pending()) {
    const SampleRecord& r = c->store.at(index);
    rb_gc_mark(static_cast<VALUE>(r.object));
    rb_gc_mark(static_cast<VALUE>(r.thread));
  }
}

// GC.compact moved objects: follow our frames, and in exact mode the live
// objects (not marked by us, but Ruby's forwarding addresses are valid for
// every moved object during the reference-update phase).
void CollectorCompact(void* ptr) {
  Collector* c = static_cast<Collector*>(ptr);
  c->label_cache_gc_count = SIZE_MAX;  // classes and threads may have moved
  if (c->busy_thread != Qnil) c->busy_thread = rb_gc_location(c->busy_thread);
  c->store.stacks().RemapFrameHandles([](uint64_t h) { return static_cast<uint64_t>(rb_gc_location(static_cast<VALUE>(h))); });
  if (!c->exact) return;
  ObjectMap& map = c->store.live_objects();
  map.Clear();
  for (uint32_t i = 0; i < c->store.capacity(); i++) {
    SampleRecord& r = c->store.at(i);
    if (r.state != RecordState::kLive) continue;
    r.object = static_cast<uint64_t>(rb_gc_location(static_cast<VALUE>(r.object)));
    map.Insert(r.object, i);
  }
}

// A running collector is a GC root, so this runs only for stopped ones —
// except at VM shutdown, when Ruby frees every object: then stop the timer
// thread (it would arm hooks for a freed collector) and leave the hooks
// installed but inert (they check the globals first).
void CollectorFree(void* ptr) {
  Collector* c = static_cast<Collector*>(ptr);
  if (g_active == c) {
    if (!c->exact) SampleTimer::Stop();
    g_active = nullptr;
  }
  if (g_freeobj_owner == c) g_freeobj_owner = nullptr;
  delete c;
}

size_t CollectorSize(const void* ptr) {
  const Collector* c = static_cast<const Collector*>(ptr);
  return sizeof(*c) + c->store.capacity() * sizeof(SampleRecord) + c->store.stacks().stack_count() * 64;
}

const rb_data_type_t kCollectorType = {
    "Fathom::Native::MemoryCollector",
    {CollectorMark, CollectorFree, CollectorSize, CollectorCompact, {nullptr}},
    nullptr,
    nullptr,
    RUBY_TYPED_FREE_IMMEDIATELY,
};

Collector* GetCollector(VALUE self) {
  return static_cast<Collector*>(rb_check_typeddata(self, &kCollectorType));
}

// ---------------------------------------------------------------- lifecycle

VALUE CollectorAlloc(VALUE klass) {
  Collector* c = new Collector();
  return TypedData_Wrap_Struct(klass, &kCollectorType, c);
}

VALUE CollectorInitialize(VALUE self, VALUE exact, VALUE interval_ns, VALUE max_depth) {
  Collector* c = GetCollector(self);
  if (c->max_depth != 0) rb_raise(eFathomError, "fathom: collector is already initialized");
  if (!RB_INTEGER_TYPE_P(interval_ns)) rb_raise(rb_eTypeError, "fathom: interval must be an Integer of nanoseconds");
  if (!RB_INTEGER_TYPE_P(max_depth)) rb_raise(rb_eTypeError, "fathom: max_depth must be an Integer");
  long long interval = NUM2LL(interval_ns);
  int depth = NUM2INT(max_depth);
  if (interval < 10000) rb_raise(rb_eArgError, "fathom: interval must be at least 10us, got %lldns", interval);
  if (depth < 1 || depth > kMaxDepthLimit)
    rb_raise(rb_eArgError, "fathom: max_depth must be between 1 and %d, got %d", kMaxDepthLimit, depth);
  c->exact = RTEST(exact);
  c->interval_ns = static_cast<uint64_t>(interval);
  c->max_depth = depth;
  return self;
}

void ResetWindow(Collector* c) {
  c->window_start_realtime_ns = RealtimeNs();
  c->window_start_mono_ns = MonotonicNs();
}

void SeedRng(Collector* c) {
  // Seeded per process (and again after fork) so forked workers do not all
  // sample the same allocations, as an unseeded generator would.
  std::random_device rd;
  c->rng.seed(rd() ^ static_cast<unsigned>(getpid()) ^ static_cast<unsigned>(MonotonicNs()));
}

void RegisterRubyThreads() {
  SampleTimer::ResetThreads();
  VALUE threads = rb_funcall(rb_cThread, id_list, 0);
  for (long i = 0; i < RARRAY_LEN(threads); i++) {
    VALUE tid = rb_funcall(RARRAY_AREF(threads, i), id_native_thread_id, 0);
    if (RB_INTEGER_TYPE_P(tid)) SampleTimer::AddThread(static_cast<pid_t>(NUM2LL(tid)));
  }
  // The calling thread first: it most likely holds the GVL on the first tick.
  SampleTimer::AddThread(CurrentTid());
}

// Another collector's records keep only what FREEOBJ told them so far.
void ReleaseFreeobjOwnership() {
  if (!g_freeobj_owner) return;
  RemoveFreeobjHook();
  g_freeobj_owner->liveness_lost = true;
  g_freeobj_owner = nullptr;
  g_freeobj_owner_self = Qnil;
}

VALUE CollectorStart(VALUE self) {
  Collector* c = GetCollector(self);
  if (c->running) return self;
  if (g_active) rb_raise(eFathomError, "fathom: another memory profiler is already running in this process");
  if (c->max_depth == 0) rb_raise(eFathomError, "fathom: collector was not initialized");

  c->frames.assign(static_cast<size_t>(c->max_depth) + 1, Qnil);
  c->lines.assign(static_cast<size_t>(c->max_depth) + 1, 0);
  c->handles.assign(static_cast<size_t>(c->max_depth) + 1, 0);
  if (c->store.live_count() == 0) ResetWindow(c);
  SeedRng(c);
  c->liveness_lost = false;

  g_active = c;
  g_active_self = self;
  if (c->exact) {
    if (g_freeobj_owner != c) {
      ReleaseFreeobjOwnership();
      g_freeobj_owner = c;
      g_freeobj_owner_self = self;
      AddFreeobjHook();
    }
    AddNewobjHook();
  } else {
    ReleaseFreeobjOwnership();
    c->last_total_allocated = rb_gc_stat(sym_total_allocated_objects);
    RegisterRubyThreads();
    rb_add_event_hook(ThreadBeginHook, RUBY_EVENT_THREAD_BEGIN, Qnil);
    rb_add_event_hook(ThreadEndHook, RUBY_EVENT_THREAD_END, Qnil);
    std::string error;
    if (!SampleTimer::Start(c->interval_ns, ArmJob, &error)) {
      rb_remove_event_hook(ThreadBeginHook);
      rb_remove_event_hook(ThreadEndHook);
      g_active = nullptr;
      g_active_self = Qnil;
      rb_raise(eFathomError, "fathom: %s", error.c_str());
    }
  }
  c->running = true;
  return self;
}

VALUE CollectorStop(VALUE self) {
  Collector* c = GetCollector(self);
  if (!c->running) return self;
  if (c->exact) {
    RemoveNewobjHook();
    // FREEOBJ stays until a flush has reported the records: flush after
    // stop (the block form does stop, then flush) must still know which
    // objects died.
  } else {
    SampleTimer::Stop();
    RemoveNewobjHook();
    rb_remove_event_hook(ThreadBeginHook);
    rb_remove_event_hook(ThreadEndHook);
  }
  CommitPending(c);
  c->running = false;
  g_active = nullptr;
  g_active_self = Qnil;
  return self;
}

VALUE CollectorRunningP(VALUE self) { return GetCollector(self)->running ? Qtrue : Qfalse; }

// ---------------------------------------------------------------- flush

struct FlushState {
  Collector* c = nullptr;
  bool gc = false;
  std::unique_ptr<HeapAggregator> aggregator;
  std::vector<uint32_t> frames_to_symbolize;
  std::unique_ptr<HeapSnapshotBuilder> snapshot_builder;  // copies rows in batches, yielding between
  HeapSnapshot snapshot;
  std::string bytes;
  // Statistics.
  int64_t started_ns = 0, walk_ns = 0, symbolize_ns = 0, encode_ns = 0;
  int64_t hold_started_ns = 0, max_hold_ns = 0;
  uint64_t records = 0, live = 0, freed = 0, drained = 0, yields = 0;
};

// Ends a stretch of holding the GVL (for the statistics).
void EndHold(FlushState* f) {
  int64_t held = MonotonicNs() - f->hold_started_ns;
  f->max_hold_ns = std::max(f->max_hold_ns, held);
}

// Yields the GVL if another thread wants it and we have held it for long.
// rb_thread_schedule only switches when some thread is waiting.
void MaybeYield(FlushState* f) {
  if (MonotonicNs() - f->hold_started_ns < kMaxGvlHoldNs || rb_thread_alone()) return;
  EndHold(f);
  rb_thread_schedule();  // may run interrupts, and raise: we are under rb_protect
  f->yields++;
  f->hold_started_ns = MonotonicNs();
}

VALUE CallId2Ref(VALUE id) { return rb_funcall(mObjectSpace, id_id2ref, 1, id); }
VALUE Id2RefMissing(VALUE, VALUE) { return Qundef; }

// The object behind a sampled record's object_id, or Qundef if it died.
// Ruby removes the id when the object is freed, so a reused slot or a moved
// object cannot be mistaken for ours.
VALUE LiveObjectForId(uint64_t object_id) {
  return rb_rescue2(CallId2Ref, ULL2NUM(object_id), Id2RefMissing, Qnil, rb_eRangeError, static_cast<VALUE>(0));
}

void WalkRecords(FlushState* f) {
  Collector* c = f->c;
  // Records appended while we yield belong to the next flush.
  uint32_t end = c->store.capacity();
  for (uint32_t i = 0; i < end; i++) {
    if ((i & 255) == 0) MaybeYield(f);
    // Re-read after every Ruby call: they can append to the record vector.
    // Freed records are folded by DrainFreed (they are on its list).
    RecordState state = c->store.at(i).state;
    if (state != RecordState::kLive) continue;
    f->records++;

    bool alive = false;
    size_t inuse_size = 0;
    if (!c->liveness_lost) {
      if (c->exact) {
        alive = true;
        inuse_size = MemsizeOf(static_cast<VALUE>(c->store.at(i).object));
      } else if (c->store.at(i).object_id != 0) {
        VALUE obj = LiveObjectForId(c->store.at(i).object_id);
        if (obj != Qundef) {
          alive = true;
          inuse_size = MemsizeOf(obj);
        }
      }
    }

    SampleRecord& r = c->store.at(i);
    HeapValues v;
    int64_t weight = static_cast<int64_t>(r.weight);
    if (!r.alloc_reported) {
      v.alloc_objects = weight;
      v.alloc_space = weight * static_cast<int64_t>(r.alloc_bytes);
      r.alloc_reported = true;
    }
    if (alive) {
      v.inuse_objects = weight;
      v.inuse_space = weight * static_cast<int64_t>(inuse_size);
      f->live++;
    }
    if (v.alloc_objects != 0 || alive)
      f->aggregator->Add(HeapAggregator::Key{r.stack_id, r.class_label, r.thread_label}, v);
    if (!alive) {
      if (c->exact) c->store.live_objects().Erase(r.object);
      f->freed++;
      c->store.Recycle(i);
    }
  }
}

void SymbolizeFrames(FlushState* f) {
  StackTable& stacks = f->c->store.stacks();
  // First collect (pure C++): the Ruby calls below may switch threads, and
  // other threads' hooks may then grow the stack table under any reference
  // we held into it. Frames referenced by retained stacks cannot die.
  std::vector<uint32_t>& todo = f->frames_to_symbolize;
  size_t rows = 0;
  for (const auto& row : f->aggregator->rows()) {
    for (uint32_t frame : stacks.frames(row.first.stack_id))
      if (!stacks.symbol(frame).resolved) todo.push_back(frame);
    // Only flush code touches the aggregator, so iterating on after a yield is safe.
    if ((++rows & 1023) == 0) MaybeYield(f);
  }
  for (size_t n = 0; n < todo.size(); n++) {
    uint32_t frame = todo[n];
    if (stacks.symbol(frame).resolved) continue;  // duplicates in todo
    FrameSymbol symbol = SymbolizeFrame(static_cast<VALUE>(stacks.frame_handle(frame)));
    stacks.SetSymbol(frame, std::move(symbol));
    if ((n & 63) == 63) MaybeYield(f);
  }
}

void* EncodeWithoutGvl(void* arg) {
  FlushState* f = static_cast<FlushState*>(arg);
  f->bytes = EncodeHeapProfile(f->snapshot);
  return nullptr;
}

VALUE FlushBody(VALUE arg) {
  FlushState* f = reinterpret_cast<FlushState*>(arg);
  Collector* c = f->c;
  f->started_ns = MonotonicNs();
  f->hold_started_ns = f->started_ns;
  // A GC can leave millions of freed records to fold: do it in batches,
  // yielding between them, before CommitPending would do it in one go.
  while (c->store.has_freed()) {
    c->drained_since_flush += c->store.DrainFreed(4096);
    MaybeYield(f);
  }
  CommitPending(c);
  if (f->gc) rb_gc_start();

  BusyScope busy(c);  // BusyScope is trivially unwound by ensure below
  f->aggregator = std::make_unique<HeapAggregator>(c->store.stacks());
  int64_t t0 = MonotonicNs();
  c->drained_since_flush += c->store.DrainFreed();
  f->drained = c->drained_since_flush;
  c->drained_since_flush = 0;
  f->aggregator->AddFreedTotals(c->store.TakeFreedTotals());
  WalkRecords(f);
  int64_t t1 = MonotonicNs();
  SymbolizeFrames(f);
  f->snapshot_builder = std::make_unique<HeapSnapshotBuilder>(c->store, *f->aggregator);
  while (!f->snapshot_builder->Step(2048)) MaybeYield(f);
  f->snapshot = f->snapshot_builder->Take();
  f->aggregator->ReleaseStacks();
  int64_t t2 = MonotonicNs();
  f->walk_ns = t1 - t0;
  f->symbolize_ns = t2 - t1;

  int64_t now_real = RealtimeNs();
  f->snapshot.time_nanos = c->window_start_realtime_ns;
  f->snapshot.duration_nanos = now_real - c->window_start_realtime_ns;
  f->snapshot.sample_period = c->exact ? 1 : static_cast<int64_t>(c->interval_ns);
  f->snapshot.period_type = c->exact ? ValueType{"allocations", "count"} : ValueType{"sample_interval", "nanoseconds"};
  f->snapshot.comment = c->exact ? "fathom heap profile, exact mode (every allocation)"
                                 : "fathom heap profile, sampled mode (interval " + std::to_string(c->interval_ns) + "ns)";
  ResetWindow(c);

  // Drain after stop in exact mode: every record has now been reported with
  // the liveness FREEOBJ gave it; nothing watches them any more.
  if (c->exact && !c->running && g_freeobj_owner == c) {
    ReleaseFreeobjOwnership();
    c->store.Clear();
  }

  EndHold(f);
  int64_t t3 = MonotonicNs();
  rb_thread_call_without_gvl(EncodeWithoutGvl, f, nullptr, nullptr);
  f->hold_started_ns = MonotonicNs();
  f->encode_ns = f->hold_started_ns - t3;
  c->flushes++;
  return rb_str_new(f->bytes.data(), static_cast<long>(f->bytes.size()));
}

// live_objects(limit) -> [[site, object], ...]: up to `limit` objects of
// live records, each with its allocation site ("String#* ← Foo#bar
// foo.rb:12": the leaf frame, then the first Ruby frame with its line).
// For the heap+retention combination: the retention snapshot explains why
// these are alive. Exact mode: records FREEOBJ has not retired (run a GC
// first so that they are really reachable); sampled mode: object_ids that
// still resolve. Holding the returned objects keeps them alive.
std::string SiteOf(Collector* c, uint32_t stack_id) {
  StackTable& stacks = c->store.stacks();
  // Copies: symbolizing calls Ruby, and other threads' hooks may then grow
  // the stack table under any reference into it.
  const std::vector<uint32_t> frames = stacks.frames(stack_id);
  const std::vector<int32_t> lines = stacks.lines(stack_id);
  if (frames.empty()) return "(no stack)";
  auto symbol = [&](uint32_t frame) -> FrameSymbol {
    if (!stacks.symbol(frame).resolved)
      stacks.SetSymbol(frame, SymbolizeFrame(static_cast<VALUE>(stacks.frame_handle(frame))));
    return stacks.symbol(frame);
  };
  std::string site = symbol(frames[0]).name;
  for (size_t k = 0; k < frames.size(); k++) {
    FrameSymbol sym = symbol(frames[k]);
    if (sym.filename.empty() || sym.filename[0] == '<') continue;  // C frames: "<cfunc>"
    if (k > 0) site += " \u2190 " + sym.name;
    site += " " + sym.filename + ":" + std::to_string(lines[k]);
    break;
  }
  return site;
}

VALUE CollectorLiveObjects(VALUE self, VALUE limit_value) {
  Collector* c = GetCollector(self);
  long limit = NUM2LONG(limit_value);
  VALUE out = rb_ary_new();
  if (c->liveness_lost || c->flushing) return out;
  std::vector<std::pair<uint32_t, uint64_t>> picked;  // (stack, object or object_id)
  for (uint32_t i = 0; i < c->store.capacity() && static_cast<long>(picked.size()) < limit; i++) {
    const SampleRecord& r = c->store.at(i);
    if (r.state != RecordState::kLive) continue;
    picked.emplace_back(r.stack_id, c->exact ? r.object : r.object_id);
  }
  // Ruby calls from here on (symbolizing, _id2ref): nothing above is used by reference.
  for (auto& p : picked) {
    VALUE obj = c->exact ? static_cast<VALUE>(p.second) : (p.second ? LiveObjectForId(p.second) : Qundef);
    if (obj == Qundef) continue;
    std::string site = SiteOf(c, p.first);
    rb_ary_push(out, rb_assoc_new(rb_utf8_str_new(site.data(), static_cast<long>(site.size())), obj));
  }
  return out;
}

VALUE StatsHash(const FlushState& f, VALUE bytes) {
  VALUE h = rb_hash_new();
  auto set = [&](const char* key, long long v) { rb_hash_aset(h, ID2SYM(rb_intern(key)), LL2NUM(v)); };
  set("samples", static_cast<long long>(f.records + f.drained));
  set("live_samples", static_cast<long long>(f.live));
  set("freed_samples", static_cast<long long>(f.freed + f.drained));
  set("flush_ns", MonotonicNs() - f.started_ns);
  set("walk_ns", f.walk_ns);
  set("symbolize_ns", f.symbolize_ns);
  set("encode_ns", f.encode_ns);
  set("max_gvl_hold_ns", f.max_hold_ns);
  set("gvl_yields", static_cast<long long>(f.yields));
  set("bytes", RSTRING_LEN(bytes));
  return h;
}

VALUE CollectorFlush(VALUE self, VALUE gc) {
  Collector* c = GetCollector(self);
  if (c->max_depth == 0) rb_raise(eFathomError, "fathom: collector was not initialized");
  if (c->flushing) rb_raise(eFathomError, "fathom: a flush of this profiler is already in progress");
  c->flushing = true;
  auto* f = new FlushState();
  f->c = c;
  f->gc = RTEST(gc);
  int state = 0;
  // Everything that can raise or longjmp runs under rb_protect with its C++
  // state in *f, so an exception (Thread#raise while we yield, say) unwinds
  // cleanly: aggregator references released, flag reset, then re-raised.
  VALUE bytes = rb_protect(FlushBody, reinterpret_cast<VALUE>(f), &state);
  c->flushing = false;
  if (state) c->committing = false;  // in case it unwound through CommitPending
  if (c->busy_depth > 0) {  // unwound past BusyScope's destructor
    c->busy_depth = 0;
    c->busy_thread = Qnil;
  }
  VALUE result = Qnil;
  if (!state) {
    EndHold(f);
    result = rb_ary_new_from_args(2, bytes, StatsHash(*f, bytes));
  }
  delete f;
  if (state) rb_jump_tag(state);
  RB_GC_GUARD(self);
  return result;
}

// ---------------------------------------------------------------- misc

VALUE CollectorAfterForkChild(VALUE self) {
  Collector* c = GetCollector(self);
  // Threads other than the forking one are gone: so is any flush in
  // progress, and the parent's samples describe the parent.
  c->flushing = false;
  c->committing = false;
  c->busy_depth = 0;
  c->busy_thread = Qnil;
  c->store.Clear();
  c->liveness_lost = false;
  SeedRng(c);
  ResetWindow(c);
  if (c->running && !c->exact) {
    c->last_total_allocated = rb_gc_stat(sym_total_allocated_objects);
    SampleTimer::hook_armed.store(false);
    RemoveNewobjHook();
    SampleTimer::AfterForkChild();
  }
  return self;
}

VALUE CollectorStats(VALUE self) {
  Collector* c = GetCollector(self);
  VALUE h = rb_hash_new();
  auto set = [&](const char* key, unsigned long long v) { rb_hash_aset(h, ID2SYM(rb_intern(key)), ULL2NUM(v)); };
  SampleTimer::Stats t = SampleTimer::stats();
  set("samples_taken", c->samples_taken);
  set("commits", c->commits);
  set("untracked_samples", c->untracked);
  set("records", c->store.live_count());
  set("stacks", c->store.stacks().stack_count());
  set("frames", c->store.stacks().frame_count());
  set("flushes", c->flushes);
  set("timer_ticks", t.ticks);
  set("timer_signals", t.signals_sent);
  set("timer_misses", t.handler_misses);
  set("timer_jobs", t.jobs_registered);
  rb_hash_aset(h, ID2SYM(rb_intern("timer_mechanism")), rb_str_new_cstr(SampleTimer::mechanism()));
  return h;
}

VALUE NativeBeforeFork(VALUE) {
  SampleTimer::PauseForFork();
  return Qnil;
}

VALUE NativeAfterForkParent(VALUE) {
  SampleTimer::ResumeAfterForkParent();
  return Qnil;
}

}  // namespace

void InitMemoryCollector(VALUE mNative, VALUE eError) {
  // Objects cached in C statics must be pinned: GC.compact would move them
  // and leave the static pointing at garbage. Fathom::Error in particular is
  // usually defined by lib/fathom/error.rb, a plain movable constant.
  eFathomError = eError;
  rb_gc_register_mark_object(eFathomError);
  id_id2ref = rb_intern("_id2ref");
  id_name = rb_intern("name");
  id_native_thread_id = rb_intern("native_thread_id");
  id_list = rb_intern("list");
  sym_total_allocated_objects = ID2SYM(rb_intern("total_allocated_objects"));
  rb_gc_stat(sym_total_allocated_objects);  // builds Ruby's stat-key table now, not in a hook
  mObjectSpace = rb_const_get(rb_cObject, rb_intern("ObjectSpace"));
  rb_gc_register_mark_object(mObjectSpace);
  rb_gc_register_address(&g_active_self);
  rb_gc_register_address(&g_freeobj_owner_self);

  cMemoryCollector = rb_define_class_under(mNative, "MemoryCollector", rb_cObject);
  rb_gc_register_mark_object(cMemoryCollector);
  rb_define_alloc_func(cMemoryCollector, CollectorAlloc);
  rb_define_method(cMemoryCollector, "initialize", RUBY_METHOD_FUNC(CollectorInitialize), 3);
  rb_define_method(cMemoryCollector, "start", RUBY_METHOD_FUNC(CollectorStart), 0);
  rb_define_method(cMemoryCollector, "stop", RUBY_METHOD_FUNC(CollectorStop), 0);
  rb_define_method(cMemoryCollector, "running?", RUBY_METHOD_FUNC(CollectorRunningP), 0);
  rb_define_method(cMemoryCollector, "flush", RUBY_METHOD_FUNC(CollectorFlush), 1);
  rb_define_method(cMemoryCollector, "after_fork_child", RUBY_METHOD_FUNC(CollectorAfterForkChild), 0);
  rb_define_method(cMemoryCollector, "stats", RUBY_METHOD_FUNC(CollectorStats), 0);
  rb_define_method(cMemoryCollector, "live_objects", RUBY_METHOD_FUNC(CollectorLiveObjects), 1);
  // Process-wide fork hooks, called by lib/fathom/fork_hooks.rb around
  // Process._fork (the child's side is MemoryCollector#after_fork_child).
  rb_define_module_function(mNative, "before_fork", RUBY_METHOD_FUNC(NativeBeforeFork), 0);
  rb_define_module_function(mNative, "after_fork_parent", RUBY_METHOD_FUNC(NativeAfterForkParent), 0);
}

}  // namespace fathom
