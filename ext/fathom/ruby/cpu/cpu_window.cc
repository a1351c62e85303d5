// A CPU collector's window taken out as CpuProfileData: frames symbolized
// with the GVL, waits relabelled as blocked on Ruby 3.1, C frames woven
// under their Ruby callers, threads named. Its flush encodes the result
// without the GVL (cpu_collector.cc).
#include <unistd.h>

#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/clock.h"
#include "native/native_weaver.h"
#include "stacks/stack_copy.h"
#include "ruby/cpu/cpu_collector.h"
#include "ruby/runtime/boundary.h"
#include "ruby/runtime/symbols.h"

namespace fathom {
namespace cpu {
namespace {

ID id_list, id_native_thread_id, id_name, id_main;

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
      "Kernel#sleep", "Kernel.sleep", "Thread#join", "Thread#value", "Thread::Queue#pop", "Thread::Queue#shift", "Thread::Queue#deq",
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
    if (row.state == ThreadState::kRunning && !row.stack.empty() && waits[row.stack.front().symbol])
      row.state = ThreadState::kBlocked;
  for (CpuTimelineSample& t : d->timeline) {
    if (t.state != ThreadState::kRunning || t.stack_id >= d->timeline_stacks.size()) continue;
    const std::vector<StackFrame>& stack = d->timeline_stacks[t.stack_id].stack;
    if (!stack.empty() && waits[stack.front().symbol]) t.state = ThreadState::kBlocked;
  }
}

// Names every frame of the window's stacks that has none yet (Ruby calls,
// with the GVL): those of its rows and of its timeline.
void SymbolizeWindow(CpuAggregate& agg) {
  StackTable& stacks = agg.stacks();
  auto symbolize = [&stacks](uint32_t stack_id) {
    for (uint32_t f : stacks.frames(stack_id))
      if (!stacks.symbol(f).resolved) stacks.SetSymbol(f, SymbolizeFrame(static_cast<VALUE>(stacks.frame_handle(f))));
  };
  agg.ForEach([&](const CpuKey& key, const CpuValues&) { symbolize(key.stack_id); });
  for (const CpuTimelineSample& t : agg.timeline()) symbolize(t.stack_id);
}

}  // namespace

CpuProfileData TakeData(CpuCollector* c) {
  Drain(c);
  c->agg.SettlePending();  // samples still waiting for their thread's stack
  CpuProfileData d;
  d.mode = c->config.mode;
  d.interval_ns = c->config.interval_ns;
  d.start_realtime_ns = c->start_realtime_ns;
  d.duration_ns = MonotonicNs() - c->start_monotonic_ns;
  d.state_source = CpuSampler::state_source();
  d.label_sets = &LabelSets::Global();
  d.dropped = c->ring->dropped() - c->dropped_reported;
  SymbolizeWindow(c->agg);
  StackTable& stacks = c->agg.stacks();
  StackCopier copier(stacks);
  std::vector<uint32_t> native_ids;  // per row, for WeaveNativeFrames
  c->agg.ForEach([&](const CpuKey& key, const CpuValues& values) {
    native_ids.push_back(key.native_id);
    CpuProfileData::Row row;
    row.stack = copier.Copy(key.stack_id);
    row.truncated = stacks.truncated(key.stack_id);
    row.thread_id = key.thread_id;
    row.state = key.state;
    row.values = values;
    row.labels = key.labels;
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
          d.timeline_stacks.push_back({copier.Copy(t.stack_id), t.native_id});
        }
        t.stack_id = it->second;
      }
      d.timeline.push_back(t);
    }
  }
  d.symbols = copier.TakeSymbols();
  d.start_monotonic_ns = c->start_monotonic_ns;
  d.pid = static_cast<int64_t>(getpid());
  if (std::string(d.state_source) == "gvl-flag") ReclassifyWaits(&d);  // on Ruby frames only
  // After the relabelling, which reads the innermost *Ruby* frame. Both the
  // pprof rows and the Firefox timeline's stacks get the C frames.
  if (c->config.native) {
    // C frames go under the Ruby frames that called them
    // (core/native/native_weaver.h); &rb_hash_aref: a function of the VM.
    NativeWeaver weaver(reinterpret_cast<uintptr_t>(&rb_hash_aref));
    for (size_t r = 0; r < d.rows.size(); r++)
      weaver.Weave(c->agg.native(native_ids[r]), &d.rows[r].stack, &d.symbols);
    for (CpuProfileData::TimelineStack& st : d.timeline_stacks)
      weaver.Weave(c->agg.native(st.native_id), &st.stack, &d.symbols);
  }
  d.thread_names = c->ended_names;
  LiveThreadNames(&d.thread_names);
  for (auto it = d.thread_names.begin(); it != d.thread_names.end();)
    it = c->agg.threads().count(it->first) ? std::next(it) : d.thread_names.erase(it);
  c->window_samples = c->agg.total().samples;
  c->window_threads = static_cast<int64_t>(c->agg.threads().size());
  // The next flush covers what happens from now on.
  c->dropped_reported = c->ring->dropped();
  c->agg.Clear();
  c->ended_names.clear();
  ResetWindow(c);
  return d;
}

void InitWindow() {
  id_list = rb_intern("list");
  id_native_thread_id = rb_intern("native_thread_id");
  id_name = rb_intern("name");
  id_main = rb_intern("main");
}

void Drain(CpuCollector* c) {
  c->drains++;
  c->ring->Drain([c](const SampleHeader& h, const uint64_t* frames, const int32_t* lines) { c->agg.Add(h, frames, lines); });
}

void ResetWindow(CpuCollector* c) {
  c->start_realtime_ns = RealtimeNs();
  c->start_monotonic_ns = MonotonicNs();
}

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

}  // namespace cpu
}  // namespace fathom
