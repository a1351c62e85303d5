// Fathom::Native::CpuCollector — where CPU and wall time go, per thread.
//
// The signal side (cpu_sampler.h) writes samples into this collector's
// SampleRing; everything else happens here, with the GVL, off the signal
// path:
//   - drain: records move from the ring into a CpuAggregate (stacks
//     interned, summed per stack/thread/state). A postponed job does it when
//     the ring is an eighth full, lib/'s drain thread every 50 ms (threads
//     all asleep on Ruby < 3.3 run no job), and encode before encoding;
//   - frames are marked for the GC: the aggregate's movable (remapped after
//     GC.compact), the ring's not-yet-drained ones pinned;
//   - encode: frames symbolized with the GVL, the data copied, and the
//     pprof encoded and gzipped without the GVL.
#include "ruby/init.h"

#include <unistd.h>

#include <map>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/clock.h"
#include "ruby/runtime/boundary.h"
#include "cpu/cpu_aggregate.h"
#include "cpu/cpu_profile.h"
#include "cpu/sample_ring.h"
#include "ruby/cpu/cpu_sampler.h"
#include "ruby/io/firefox_parts.h"
#include "ruby/runtime/symbols.h"
#include "native/native_capture.h"
#include "native/native_stack_resolver.h"
#include "ruby/runtime/postponed_job.h"

namespace fathom {
namespace {

constexpr int kMaxDepthLimit = 4096;  // Options::MAX_DEPTH_RANGE
// Ring cells: 2048 at the default max_depth 128 (3 MB): at the default
// 10 ms and 8 busy threads, 25 s of samples; at 100 us, ~250 ms — the drain
// job and thread keep far ahead of that. Deeper stacks get fewer cells
// (at least 256) so the ring stays within ~13 MB.
size_t RingCapacity(int max_depth) {
  size_t cells = 2048 * 128 / static_cast<size_t>(max_depth);
  return cells < 256 ? 256 : cells > 2048 ? 2048 : cells;
}

VALUE sym_cpu, sym_wall, sym_pprof, sym_firefox;
ID id_list, id_native_thread_id, id_name, id_main;

struct CpuCollector {
  std::unique_ptr<SampleRing> ring;  // null until initialize
  CpuAggregate agg;
  CpuSampler::Config config;
  int max_depth = 0;
  bool running = false;
  std::map<int32_t, std::string> ended_names;  // threads that ended this window
  int64_t start_realtime_ns = 0, start_monotonic_ns = 0;
  uint64_t drains = 0, drain_jobs = 0, dropped_reported = 0;
  // What the last encoded window held: what `fathom run` prints must be
  // what the file has (threads_seen also counts threads that ended unsampled).
  int64_t window_samples = 0, window_threads = 0;
};

CpuCollector* g_active = nullptr;  // the one the sampler writes into
VALUE g_active_self = Qnil;        // kept alive (a GC root) while running

void Drain(CpuCollector* c) {
  c->drains++;
  c->ring->Drain([c](const SampleHeader& h, const uint64_t* frames, const int32_t* lines) { c->agg.Add(h, frames, lines); });
}

void DrainJob(void*) {
  NoThrow("cpu drain job", [] {
    if (g_active == nullptr) return;
    g_active->drain_jobs++;
    Drain(g_active);
  });
}

PostponedJob g_drain_job(DrainJob);

// "worker" / "main" / "thread 1234": the thread's name label.
std::string NameOf(VALUE thread, int32_t tid) {
  VALUE name = Qnil, main = Qnil;
  TryProtect([&] {
    name = rb_funcall(thread, id_name, 0);
    main = rb_funcall(rb_cThread, id_main, 0);
  });
  if (RB_TYPE_P(name, T_STRING)) return std::string(RSTRING_PTR(name), static_cast<size_t>(RSTRING_LEN(name)));
  if (thread == main) return "main";
  return "thread " + std::to_string(tid);
}

// A watched thread ends: keep its name for the profile. Kept whether or not
// a sample of it has been drained yet: the timer thread may still be
// publishing one it took for this thread (a blocked thread's wall sample)
// when the thread leaves, and that sample would then carry no name (seen on
// 3.3: a track "thread 12471" for a thread named t1). The window's encode
// drops names of threads that have no sample.
void OnThreadEnd(int32_t tid, VALUE thread) {
  CpuCollector* c = g_active;
  if (c == nullptr) return;
  Drain(c);
  c->ended_names[tid] = NameOf(thread, tid);
}

// ---------------------------------------------------------------- GC glue

void CollectorMark(void* ptr) {
  NoThrow("cpu collector mark", [ptr] {
    CpuCollector* c = static_cast<CpuCollector*>(ptr);
    c->agg.stacks().ForEachFrameHandle([](uint64_t h) { rb_gc_mark_movable(static_cast<VALUE>(h)); });
    // Published but not yet drained: pinned, so the handles stay valid (and
    // in place) until the drain interns them.
    if (c->ring)
      c->ring->ForEachPending([](const SampleHeader& h, const uint64_t* frames, const int32_t*) {
        for (uint16_t i = 0; i < h.depth; i++) rb_gc_mark(static_cast<VALUE>(frames[i]));
      });
  });
}

void CollectorCompact(void* ptr) {
  NoThrow("cpu collector compact", [ptr] {
    CpuCollector* c = static_cast<CpuCollector*>(ptr);
    c->agg.stacks().RemapFrameHandles(
        [](uint64_t h) { return static_cast<uint64_t>(rb_gc_location(static_cast<VALUE>(h))); });
  });
}

// A running collector is a GC root, so this runs for stopped ones, or for
// every object at VM shutdown: then stop the sampler first.
void CollectorFree(void* ptr) {
  NoThrow("cpu collector free", [ptr] {
    CpuCollector* c = static_cast<CpuCollector*>(ptr);
    if (g_active == c) {
      CpuSampler::Stop();
      g_active = nullptr;
      g_active_self = Qnil;
    }
    delete c;
  });
}

size_t CollectorSize(const void* ptr) {
  const CpuCollector* c = static_cast<const CpuCollector*>(ptr);
  size_t ring = c->ring ? c->ring->capacity() * (sizeof(SampleHeader) + 8 + c->ring->max_depth() * 12 +
                                                  c->ring->native_max() * sizeof(uintptr_t))
                        : 0;
  return sizeof(*c) + ring + c->agg.size() * 48 + c->agg.stacks().stack_count() * 64;
}

const rb_data_type_t kCpuCollectorType = {
    "Fathom::Native::CpuCollector",
    {CollectorMark, CollectorFree, CollectorSize, CollectorCompact, {nullptr}},
    nullptr,
    nullptr,
    RUBY_TYPED_FREE_IMMEDIATELY,
};

CpuCollector* Unwrap(VALUE self) { return static_cast<CpuCollector*>(rb_check_typeddata(self, &kCpuCollectorType)); }

CpuCollector* Initialized(CpuCollector* c) {
  if (!c->ring) ThrowFathomError("fathom: CPU collector was not initialized");
  return c;
}

VALUE CollectorAlloc(VALUE klass) {
  return RubyMethod([klass] { return TypedData_Wrap_Struct(klass, &kCpuCollectorType, new CpuCollector()); });
}

// initialize(mode, interval_ns, max_depth, timeline, native): mode :cpu or
// :wall; timeline: keep every sample in order (for the Firefox Profiler
// format); native: each sample also holds its C frames (core/native/).
VALUE CollectorInitialize(VALUE self, VALUE mode, VALUE interval_ns, VALUE max_depth, VALUE timeline, VALUE native) {
  CpuCollector* c = Unwrap(self);
  return RubyMethod([&] {
    if (c->ring) ThrowFathomError("fathom: CPU collector is already initialized");
    if (mode != sym_cpu && mode != sym_wall) ThrowArgumentError("fathom: mode must be :cpu or :wall");
    if (!RB_INTEGER_TYPE_P(interval_ns)) ThrowTypeError("fathom: interval must be an Integer of nanoseconds");
    if (!RB_INTEGER_TYPE_P(max_depth)) ThrowTypeError("fathom: max_depth must be an Integer");
    long long interval = NUM2LL(interval_ns);
    int depth = NUM2INT(max_depth);
    if (interval < 10000) ThrowArgumentError("fathom: interval must be at least 10us, got %lldns", interval);
    if (depth < 1 || depth > kMaxDepthLimit)
      ThrowArgumentError("fathom: max_depth must be between 1 and %d, got %d", kMaxDepthLimit, depth);
    c->config.mode = mode == sym_wall ? CpuMode::kWall : CpuMode::kCpu;
    c->config.interval_ns = interval;
    c->max_depth = depth;
    c->config.native = RTEST(native);
    if (c->config.native) InitNativeCapture();  // dlopen, warm-up: never in a handler
    c->ring = std::make_unique<SampleRing>(RingCapacity(depth), static_cast<size_t>(depth),
                                           c->config.native ? kMaxNativeFrames : 0);
    c->agg.set_keep_timeline(RTEST(timeline));
    c->agg.set_mode(c->config.mode);
    return self;
  });
}

void ResetWindow(CpuCollector* c) {
  c->start_realtime_ns = RealtimeNs();
  c->start_monotonic_ns = MonotonicNs();
}

VALUE CollectorStart(VALUE self) {
  CpuCollector* c = Unwrap(self);
  return RubyMethod([&] {
    Initialized(c);
    if (c->running) return self;
    if (g_active != nullptr || CpuSampler::running())
      ThrowFathomError("fathom: another CPU or wall profiler is already running in this process");
    if (c->agg.size() == 0) ResetWindow(c);
    g_active = c;
    g_active_self = self;
    std::string error;
    if (!CpuSampler::Start(c->ring.get(), c->config, &g_drain_job, OnThreadEnd, &error)) {
      g_active = nullptr;
      g_active_self = Qnil;
      ThrowFathomError("fathom: cannot start the %s profiler: %s", CpuModeName(c->config.mode), error.c_str());
    }
    c->running = true;
    return self;
  });
}

VALUE CollectorStop(VALUE self) {
  CpuCollector* c = Unwrap(self);
  return RubyMethod([&] {
    Initialized(c);
    if (!c->running) return self;
    CpuSampler::Stop(/*account_blocked=*/true);
    c->running = false;
    Drain(c);
    g_active = nullptr;
    g_active_self = Qnil;
    return self;
  });
}

VALUE CollectorRunningP(VALUE self) {
  CpuCollector* c = Unwrap(self);
  // The sampler stops by itself at exit (cpu_sampler.cc, StopAtExit).
  return RubyMethod([c] { return Initialized(c)->running && CpuSampler::running() ? Qtrue : Qfalse; });
}

VALUE CollectorDrain(VALUE self) {
  CpuCollector* c = Unwrap(self);
  return RubyMethod([&] {
    Drain(Initialized(c));
    return Qnil;
  });
}

// Fathom::Native.internal_thread(bool), called by lib/'s helper threads on
// themselves (Fathom::InternalThread): Fathom's own sleeping threads are
// not sampled by any CPU/wall profile.
VALUE NativeInternalThread(VALUE, VALUE internal) {
  return RubyMethod([&] {
    CpuSampler::SetCurrentThreadInternal(RTEST(internal));
    return Qnil;
  });
}

// In a forked child: the child profiles itself (its only thread), from an
// empty window.
VALUE CollectorAfterForkChild(VALUE self) {
  CpuCollector* c = Unwrap(self);
  return RubyMethod([&] {
    Initialized(c);
    c->ring->Drain([](const SampleHeader&, const uint64_t*, const int32_t*) {});
    c->agg.Clear();
    c->ended_names.clear();
    ResetWindow(c);
    if (c->running) CpuSampler::AfterForkChild();
    return self;
  });
}

// Names of the threads alive now, by native thread id.
void LiveThreadNames(std::map<int32_t, std::string>* names) {
  VALUE threads = Qnil;
  TryProtect([&] { threads = rb_funcall(rb_cThread, id_list, 0); });
  if (!RB_TYPE_P(threads, T_ARRAY)) return;
  for (long i = 0; i < RARRAY_LEN(threads); i++) {
    VALUE th = RARRAY_AREF(threads, i);
    VALUE tid = Qnil;
    TryProtect([&] { tid = rb_funcall(th, id_native_thread_id, 0); });
    if (!RB_INTEGER_TYPE_P(tid)) continue;
    int32_t id = static_cast<int32_t>(NUM2LL(tid));
    (*names)[id] = NameOf(th, id);
  }
  RB_GC_GUARD(threads);
}

// Ruby 3.1 (no GVL events): ruby_thread_has_gvl_p says "running" for a
// thread in Kernel#sleep, Thread#join, Queue#pop, Mutex#lock or
// ConditionVariable#wait (these release the GVL without entering a
// blocking region). A sample whose innermost frame is one of these C
// methods is shown as blocked: they run no Ruby code while waiting.
void ReclassifyWaits(CpuProfileData* d) {
  static const char* const kWaits[] = {
      "Kernel#sleep", "Thread#join", "Thread#value", "Thread::Queue#pop", "Thread::Queue#shift", "Thread::Queue#deq",
      "Thread::SizedQueue#pop", "Thread::SizedQueue#push", "Thread::SizedQueue#shift", "Thread::SizedQueue#deq",
      "Thread::SizedQueue#enq", "Thread::SizedQueue#<<", "Thread::Mutex#lock", "Thread::Mutex#synchronize",
      "Thread::Mutex#sleep", "Thread::ConditionVariable#wait", "Monitor#enter", "Monitor#synchronize",
      "MonitorMixin::ConditionVariable#wait", "Kernel#gets", "IO.select", "Process.wait", "Process.wait2",
      "Process.waitpid", "Thread.pass"};
  std::vector<bool> waits(d->symbols.size(), false);
  for (size_t i = 0; i < d->symbols.size(); i++)
    for (const char* w : kWaits)
      if (d->symbols[i].name == w) waits[i] = true;
  for (CpuProfileData::Row& row : d->rows)
    if (row.state == ThreadState::kRunning && !row.frames.empty() && waits[row.frames.front()])
      row.state = ThreadState::kBlocked;
  for (CpuTimelineSample& t : d->timeline) {
    if (t.state != ThreadState::kRunning || t.stack_id >= d->timeline_stacks.size()) continue;
    const std::vector<uint32_t>& frames = d->timeline_stacks[t.stack_id].frames;
    if (!frames.empty() && waits[frames.front()]) t.state = ThreadState::kBlocked;
  }
}

// Puts each row's C frames under the Ruby frames that called them
// (core/native/stack_weaver.h): a cfunc is a Ruby frame without a source
// path. Native frames become symbols named "deflate" (or "<libz.so.1>" for
// an unnamed function) with the object as file name, one per distinct
// name and object.
// Weaves the C frames of pcs into one Ruby stack (frames and lines, leaf
// first, indices into d->symbols), adding a symbol per distinct C function.
class NativeWeaver {
 public:
  NativeWeaver() : resolver_(reinterpret_cast<uintptr_t>(&rb_hash_aref)) {}

  void Weave(const std::vector<uintptr_t>& pcs, std::vector<uint32_t>* row_frames, std::vector<int32_t>* row_lines,
             CpuProfileData* d) {
    if (pcs.empty() || row_frames->empty()) return;
    // Rows are leaf first; the weaver wants outermost first.
    size_t n = row_frames->size();
    std::vector<bool> is_cfunc(n);
    for (size_t i = 0; i < n; i++) {
      const std::string& file = d->symbols[(*row_frames)[i]].filename;
      is_cfunc[n - 1 - i] = file.empty() || file == "<cfunc>";
    }
    std::vector<WovenFrame> woven = resolver_.Weave(is_cfunc, pcs.data(), pcs.size());
    std::vector<uint32_t> frames;
    std::vector<int32_t> lines;
    frames.reserve(woven.size());
    lines.reserve(woven.size());
    for (auto it = woven.rbegin(); it != woven.rend(); ++it) {  // back to leaf first
      if (!it->native) {
        size_t leaf_index = n - 1 - it->index;
        frames.push_back((*row_frames)[leaf_index]);
        lines.push_back(leaf_index < row_lines->size() ? (*row_lines)[leaf_index] : 0);
        continue;
      }
      const NativeFrame& f = resolver_.Frame(pcs[it->index]).frame;
      auto key = std::make_pair(f.DisplayName(), f.object);
      auto found = symbols_.find(key);
      if (found == symbols_.end()) {
        FrameSymbol sym;
        sym.name = key.first;
        sym.filename = key.second;
        sym.resolved = true;
        sym.native = true;
        found = symbols_.emplace(key, static_cast<uint32_t>(d->symbols.size())).first;
        d->symbols.push_back(std::move(sym));
      }
      frames.push_back(found->second);
      lines.push_back(0);
    }
    *row_frames = std::move(frames);
    *row_lines = std::move(lines);
  }

 private:
  NativeStackResolver resolver_;
  std::map<std::pair<std::string, std::string>, uint32_t> symbols_;
};

CpuProfileData TakeData(CpuCollector* c) {
  Drain(c);
  CpuProfileData d;
  d.mode = c->config.mode;
  d.interval_ns = c->config.interval_ns;
  d.start_realtime_ns = c->start_realtime_ns;
  d.duration_ns = MonotonicNs() - c->start_monotonic_ns;
  d.state_source = CpuSampler::state_source();
  d.dropped = c->ring->dropped() - c->dropped_reported;
  StackTable& stacks = c->agg.stacks();
  std::unordered_map<uint32_t, uint32_t> local;  // frame index -> index in d.symbols
  auto local_frames = [&](uint32_t stack_id) {
    const std::vector<uint32_t>& frames = stacks.frames(stack_id);
    std::vector<uint32_t> out;
    out.reserve(frames.size());
    for (uint32_t f : frames) {
      auto it = local.find(f);
      if (it == local.end()) {
        if (!stacks.symbol(f).resolved) stacks.SetSymbol(f, SymbolizeFrame(static_cast<VALUE>(stacks.frame_handle(f))));
        it = local.emplace(f, static_cast<uint32_t>(d.symbols.size())).first;
        d.symbols.push_back(stacks.symbol(f));
      }
      out.push_back(it->second);
    }
    return out;
  };
  std::vector<uint32_t> native_ids;  // per row, for WeaveNativeFrames
  c->agg.ForEach([&](const CpuKey& key, const CpuValues& values) {
    native_ids.push_back(key.native_id);
    CpuProfileData::Row row;
    row.lines = stacks.lines(key.stack_id);
    row.truncated = stacks.truncated(key.stack_id);
    row.frames = local_frames(key.stack_id);
    row.thread_id = key.thread_id;
    row.state = key.state;
    row.values = values;
    d.rows.push_back(std::move(row));
  });
  if (!c->agg.timeline().empty()) {
    // (stack id, native id) -> index in d.timeline_stacks
    std::map<std::pair<uint32_t, uint32_t>, uint32_t> local_stacks;
    d.timeline.reserve(c->agg.timeline().size());
    for (CpuTimelineSample t : c->agg.timeline()) {
      // An empty stack (taken during GC) stays "no stack".
      if (stacks.frames(t.stack_id).empty()) {
        t.stack_id = UINT32_MAX;
      } else {
        auto key = std::make_pair(t.stack_id, t.native_id);
        auto it = local_stacks.find(key);
        if (it == local_stacks.end()) {
          it = local_stacks.emplace(key, static_cast<uint32_t>(d.timeline_stacks.size())).first;
          d.timeline_stacks.push_back({local_frames(t.stack_id), stacks.lines(t.stack_id), t.native_id});
        }
        t.stack_id = it->second;
      }
      d.timeline.push_back(t);
    }
  }
  d.start_monotonic_ns = c->start_monotonic_ns;
  d.pid = static_cast<int64_t>(getpid());
  if (std::string(d.state_source) == "gvl-flag") ReclassifyWaits(&d);  // on Ruby frames only
  // After the relabelling, which reads the innermost *Ruby* frame. Both the
  // pprof rows and the Firefox timeline's stacks get the C frames.
  if (c->config.native) {
    NativeWeaver weaver;
    for (size_t r = 0; r < d.rows.size(); r++)
      weaver.Weave(c->agg.native(native_ids[r]), &d.rows[r].frames, &d.rows[r].lines, &d);
    for (CpuProfileData::TimelineStack& st : d.timeline_stacks)
      weaver.Weave(c->agg.native(st.native_id), &st.frames, &st.lines, &d);
  }
  d.thread_names = c->ended_names;
  LiveThreadNames(&d.thread_names);
  for (auto it = d.thread_names.begin(); it != d.thread_names.end();)
    it = c->agg.threads().count(it->first) ? std::next(it) : d.thread_names.erase(it);
  c->window_samples = c->agg.total().samples;
  c->window_threads = static_cast<int64_t>(c->agg.threads().size());
  // The next encode covers what happens from now on.
  c->dropped_reported = c->ring->dropped();
  c->agg.Clear();
  c->ended_names.clear();
  ResetWindow(c);
  return d;
}

struct EncodeJob {
  CpuProfileData data;
  bool firefox = false;
  bool gzip = true;
  std::string out;
  VALUE result = Qnil;
};

void EncodeOffGvl(EncodeJob* job) {
  WithoutGvl([job] {
    FATHOM_FAULT_POINT("cpu_encode");
    job->out = job->firefox ? EncodeCpuFirefox(job->data, job->gzip) : EncodeCpuPprof(job->data);
  });
  job->result = rb_str_new(job->out.data(), static_cast<long>(job->out.size()));
}

// encode(format, gzip) -> String: :pprof (always gzipped) or :firefox
// (JSON, gzipped when gzip; needs timeline: true at initialize). Covers the
// window since start (or the previous encode, or the fork) and starts a new one.
VALUE CollectorEncode(VALUE self, VALUE format, VALUE gzip) {
  CpuCollector* c = Unwrap(self);
  return RubyMethod([&] {
    if (format != sym_pprof && format != sym_firefox)
      ThrowArgumentError("fathom: the CPU profiler writes format :pprof or :firefox");
    auto job = std::make_unique<EncodeJob>();
    job->firefox = format == sym_firefox;
    job->gzip = RTEST(gzip);
    job->data = TakeData(Initialized(c));
    EncodeJob* j = job.get();
    Protect([j] { EncodeOffGvl(j); });
    return j->result;
  });
}

// take_firefox_part(parts): this window's data into a FirefoxParts for one
// combined Firefox file (needs timeline: true); starts a new window.
VALUE CollectorTakeFirefoxPart(VALUE self, VALUE parts) {
  CpuCollector* c = Unwrap(self);
  FirefoxParts* p = UnwrapFirefoxParts(parts);
  return RubyMethod([&] {
    if (!c->agg.keep_timeline())
      ThrowArgumentError("fathom: the CPU profiler keeps a timeline only with format :firefox");
    p->cpu = std::make_unique<CpuProfileData>(TakeData(Initialized(c)));
    return Qnil;
  });
}

VALUE CollectorStats(VALUE self) {
  CpuCollector* c = Unwrap(self);
  return RubyMethod([&] {
    Initialized(c);
    CpuSampler::Stats s = CpuSampler::stats();
    VALUE h = rb_hash_new();
    auto set = [&](const char* key, long long v) { rb_hash_aset(h, ID2SYM(rb_intern(key)), LL2NUM(v)); };
    rb_hash_aset(h, ID2SYM(rb_intern("mode")), c->config.mode == CpuMode::kWall ? sym_wall : sym_cpu);
    set("interval_ns", c->config.interval_ns);
    set("samples", static_cast<long long>(c->ring->written()));
    set("dropped", static_cast<long long>(c->ring->dropped()));
    set("pending", static_cast<long long>(c->ring->pending()));
    set("signals", static_cast<long long>(s.signals));
    set("ignored_signals", static_cast<long long>(s.foreign_signals));
    set("timer_errors", static_cast<long long>(s.timer_errors));
    set("threads_seen", static_cast<long long>(s.threads_seen));
    set("window_samples", c->window_samples);
    set("window_threads", c->window_threads);
    set("threads_sampled_now", s.threads_now);
    set("drains", static_cast<long long>(c->drains));
    set("drain_jobs", static_cast<long long>(c->drain_jobs));
    set("stacks", static_cast<long long>(c->agg.stacks().stack_count()));
    rb_hash_aset(h, ID2SYM(rb_intern("states")), rb_str_new_cstr(CpuSampler::state_source()));
    return h;
  });
}

}  // namespace

void InitCpuCollector(VALUE mNative) {
  g_drain_job.Preregister();
  InitCpuSampler();
  sym_cpu = ID2SYM(rb_intern("cpu"));
  sym_wall = ID2SYM(rb_intern("wall"));
  sym_pprof = ID2SYM(rb_intern("pprof"));
  sym_firefox = ID2SYM(rb_intern("firefox"));
  id_list = rb_intern("list");
  id_native_thread_id = rb_intern("native_thread_id");
  id_name = rb_intern("name");
  id_main = rb_intern("main");
  rb_gc_register_address(&g_active_self);

  rb_define_module_function(mNative, "internal_thread", RUBY_METHOD_FUNC(NativeInternalThread), 1);
  VALUE klass = rb_define_class_under(mNative, "CpuCollector", rb_cObject);
  rb_gc_register_mark_object(klass);
  rb_define_alloc_func(klass, CollectorAlloc);
  rb_define_method(klass, "initialize", RUBY_METHOD_FUNC(CollectorInitialize), 5);
  rb_define_method(klass, "start", RUBY_METHOD_FUNC(CollectorStart), 0);
  rb_define_method(klass, "stop", RUBY_METHOD_FUNC(CollectorStop), 0);
  rb_define_method(klass, "running?", RUBY_METHOD_FUNC(CollectorRunningP), 0);
  rb_define_method(klass, "drain", RUBY_METHOD_FUNC(CollectorDrain), 0);
  rb_define_method(klass, "encode", RUBY_METHOD_FUNC(CollectorEncode), 2);
  rb_define_method(klass, "after_fork_child", RUBY_METHOD_FUNC(CollectorAfterForkChild), 0);
  rb_define_method(klass, "stats", RUBY_METHOD_FUNC(CollectorStats), 0);
  rb_define_method(klass, "take_firefox_part", RUBY_METHOD_FUNC(CollectorTakeFirefoxPart), 1);
}

}  // namespace fathom
