// CpuAggregate: samples drained from the SampleRing, summed per
// (stack, thread, state, labels), as the schema says (cpu_schema.h). Runs off the signal path (with the GVL, in a
// postponed job or a drain call), so it may allocate; never touches Ruby.
//
// Stacks are interned in a StackTable (core/stacks/stack_table.h), which keeps
// one reference per distinct (stack, thread, state) key: the Ruby layer
// marks the table's frame handles for the GC and remaps them after
// compaction, exactly as the heap profiler does.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <vector>

#include "cpu/cpu_schema.h"
#include "cpu/sample_ring.h"
#include "stacks/stack_table.h"

namespace fathom {

// A row's key: the stack, thread and state, the sample's C frames, and its
// labels as the handler recorded them (cpu_schema.h).
struct CpuKey {
  uint32_t stack_id;
  int32_t thread_id;
  ThreadState state;
  uint32_t native_id = 0;  // CpuAggregate::native(id); 0: no native frames
  CpuLabels labels;
  bool operator==(const CpuKey& o) const {
    return stack_id == o.stack_id && thread_id == o.thread_id && state == o.state && native_id == o.native_id &&
           labels == o.labels;
  }
};

// Per thread: the values per state (indexed by ThreadState).
using ThreadTotals = std::array<CpuValues, kThreadStateCount>;

// One sample in time order, for timelines (the Firefox Profiler output).
struct CpuTimelineSample {
  int64_t time_ns;
  int32_t thread_id;
  uint32_t stack_id;
  ThreadState state;
  int64_t cpu_ns, wall_ns;
  uint32_t native_id = 0;  // native PCs (CpuAggregate::native), 0 = none
};

class CpuAggregate {
 public:
  // Also keep every sample in order (each holds a stack reference).
  void set_keep_timeline(bool keep) { keep_timeline_ = keep; }
  bool keep_timeline() const { return keep_timeline_; }
  // The sampler's clock (AccountedParts); CPU unless told.
  void set_mode(CpuMode mode) { mode_ = mode; }
  const std::vector<CpuTimelineSample>& timeline() const { return timeline_; }

  // One drained sample (frames leaf first, header.depth of them), accounted
  // as AccountedParts says. A sample with stack_from_previous gets its
  // thread's previous stack (kept across windows); with none yet, it is held
  // for the thread's next stack (pending_).
  void Add(const SampleHeader& header, const uint64_t* frames, const int32_t* lines);
  // Held samples whose thread has had no stack since are accounted with the
  // empty stack ("stack not read"): before a window is read.
  void SettlePending();
  // A thread ended (Ruby 3.1 gives its native thread id to the next Ruby
  // thread): its held samples settle, its previous stack is forgotten.
  void ForgetThread(int32_t thread_id);
  // Every thread's, when sampling (re)starts.
  void ForgetThreads();

  StackTable& stacks() { return stacks_; }
  const StackTable& stacks() const { return stacks_; }

  // f(const CpuKey&, const CpuValues&) in first-insertion order.
  template <typename F>
  void ForEach(F&& f) const {
    for (const Entry& e : entries_) f(e.key, e.values);
  }
  size_t size() const { return entries_.size(); }
  // Per-thread totals by state, ordered by thread id.
  const std::map<int32_t, ThreadTotals>& threads() const { return threads_; }
  CpuValues total() const;
  // The native PCs of a key (innermost first); id 0 is the empty stack.
  const std::vector<uintptr_t>& native(uint32_t id) const { return natives_[id]; }

  // Forgets the window (the next one starts empty); each thread's previous
  // stack stays, for a thread that goes on sleeping into the next window.
  void Clear();

 private:
  struct Entry {
    CpuKey key;
    CpuValues values;
  };
  struct KeyHash {
    size_t operator()(const CpuKey& k) const;
  };
  // A sample taken while a GC ran, of a thread the GC did not stop (asleep,
  // blocked, in C without the GVL), with no previous stack that is surely
  // still its own: none read yet (Ruby 3.1 samples such threads from the
  // start), or one from before it took the GVL again (3.2+: a wall-mode
  // thread woken during a GC). Its stack is the one it had then, which is
  // the next one read if it ran no Ruby code in between (on 3.2+ a probe at
  // its RESUMED reads it); until then it waits here (its header, without
  // the ring's native PCs, which are interned already).
  struct Pending {
    SampleHeader header;
    uint32_t native_id;
  };
  static constexpr uint32_t kNoStack = UINT32_MAX;
  static constexpr size_t kMaxHeld = 4096;  // per thread (~40 s of 10 ms samples)
  static bool RanNoRubySince(const SampleHeader& header);
  uint32_t InternNative(const SampleHeader& header);
  // Adds the sample's parts under `stack`; takes its own references.
  void Account(const SampleHeader& header, uint32_t stack, uint32_t native_id);
  // Accounts them under `stack` (kNoStack: the empty stack) and empties it.
  void SettleHeld(std::vector<Pending>* held, uint32_t stack);
  StackTable stacks_;
  std::vector<Entry> entries_;
  std::unordered_map<CpuKey, size_t, KeyHash> index_;
  std::map<int32_t, ThreadTotals> threads_;
  // Each thread's latest stack (one reference held each), across windows
  // until the thread ends or sampling restarts.
  std::unordered_map<int32_t, uint32_t> last_stack_;
  std::unordered_map<int32_t, std::vector<Pending>> pending_;
  bool keep_timeline_ = false;
  CpuMode mode_ = CpuMode::kCpu;
  std::vector<CpuTimelineSample> timeline_;
  // Native stacks, interned by their bytes (ids index natives_).
  std::vector<std::vector<uintptr_t>> natives_{std::vector<uintptr_t>()};
  std::unordered_map<std::string, uint32_t> native_index_;
};

}  // namespace fathom
