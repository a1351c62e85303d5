#include "cpu/sample_ring.h"

namespace fathom {

const char* ThreadStateName(ThreadState state) {
  switch (state) {
    case ThreadState::kRunning: return "running";
    case ThreadState::kGvlWait: return "gvl-wait";
    case ThreadState::kBlocked: return "blocked";
    case ThreadState::kGc: return "gc";
    case ThreadState::kNoGvl: return "running";
    case ThreadState::kUnknown: break;
  }
  return "unknown";
}

int AccountedParts(const SampleHeader& h, CpuMode mode, AccountedPart parts[2]) {
  int64_t cpu = h.cpu_delta_ns > 0 ? h.cpu_delta_ns : 0;
  int64_t wall = h.wall_delta_ns > 0 ? h.wall_delta_ns : 0;
  // Wall mode: a blocked thread's own crumbs (its wake-ups at our signal,
  // our handler: tens of microseconds a sample) are not running. Crumbs
  // are under a tenth of the sample and under kCrumbsNs; anything more is
  // C code that ran without the GVL. The absolute floor matters for a
  // sample that covers a whole blocking region (3.2+ wall mode masks
  // SIGPROF while a thread is outside Ruby and samples it at READY): a C
  // call that burned 0.5 s of CPU over 6 s on a loaded machine is 8%, and
  // read as blocked whole under the tenth alone.
  constexpr int64_t kCrumbsNs = 1000000;
  bool on_a_cpu =
    mode == CpuMode::kCpu ? cpu > 0 : (cpu * 10 >= wall || cpu >= kCrumbsNs || h.stayed_runnable) && cpu > 0;
  if (h.state != ThreadState::kBlocked || !on_a_cpu) {
    parts[0] = AccountedPart{h.state, {1, cpu, wall}};
    return 1;
  }
  // Wall mode, C code without the GVL that never gave up its CPU: the time
  // it was off a CPU it waited for one (a busy machine, a CPU quota), which
  // is running as the program sees it, not blocked. Below a tenth of a CPU
  // the rule above would call it blocked: under a load of 13 on 2 cores a
  // thread in C got 6% of a CPU and 40% of its CPU time read as blocked.
  if (mode == CpuMode::kWall && h.stayed_runnable) {
    parts[0] = AccountedPart{ThreadState::kNoGvl, {1, cpu, wall}};
    return 1;
  }
  int64_t on_cpu = cpu < wall ? cpu : wall;
  int64_t off_cpu = wall - on_cpu;
  // CPU mode weighs samples by CPU time: the sample is the CPU's.
  bool mostly_on_cpu = mode == CpuMode::kCpu || on_cpu >= off_cpu;
  parts[0] = AccountedPart{ThreadState::kNoGvl, {mostly_on_cpu ? 1 : 0, cpu, on_cpu}};
  if (off_cpu == 0) return 1;
  parts[1] = AccountedPart{ThreadState::kBlocked, {mostly_on_cpu ? 0 : 1, 0, off_cpu}};
  return 2;
}

ThreadState TimelineState(const SampleHeader& h, CpuMode mode) {
  AccountedPart parts[2];
  int n = AccountedParts(h, mode, parts);
  // Put on a CPU by the kCrumbsNs floor alone (wall mode, under a tenth of
  // the sample, mostly blocked): a sleeper whose one sample covers its whole
  // 0.3 s sleep (3.2+ masks SIGPROF outside Ruby) with its start-up's few
  // milliseconds of CPU. pprof keeps that CPU in its own part; the timeline
  // draws the sample blocked, as it was, not 0.3 s "running without GVL".
  if (n == 2 && mode == CpuMode::kWall && parts[1].values.samples == 1 &&
      h.cpu_delta_ns * 10 < h.wall_delta_ns) {
    return ThreadState::kBlocked;
  }
  return parts[0].state;
}

namespace {
size_t RoundUpPow2(size_t n) {
  size_t p = 2;
  while (p < n) p <<= 1;
  return p;
}
}  // namespace

SampleRing::SampleRing(size_t capacity, size_t max_depth, size_t native_max)
    : capacity_(RoundUpPow2(capacity)),
      max_depth_(max_depth == 0 ? 1 : max_depth),
      native_max_(native_max),
      cells_(new Cell[capacity_]),
      frames_(new uint64_t[capacity_ * max_depth_]()),
      lines_(new int32_t[capacity_ * max_depth_]()),
      native_(native_max == 0 ? nullptr : new uintptr_t[capacity_ * native_max]()) {
  for (size_t i = 0; i < capacity_; i++) cells_[i].seq.store(i, std::memory_order_relaxed);
}

SampleRing::Slot SampleRing::Claim() noexcept {
  uint64_t pos = write_pos_.load(std::memory_order_relaxed);
  for (;;) {
    Cell& c = cell(pos);
    uint64_t seq = c.seq.load(std::memory_order_acquire);
    int64_t dif = static_cast<int64_t>(seq) - static_cast<int64_t>(pos);
    if (dif == 0) {
      if (write_pos_.compare_exchange_weak(pos, pos + 1, std::memory_order_relaxed)) {
        Slot s;
        s.header = &c.header;
        s.frames = frames_of(pos);
        s.lines = lines_of(pos);
        c.header.native = native_of(pos);
        c.header.native_depth = 0;
        s.position = pos;
        return s;
      }
      // pos was reloaded by the failed CAS: try again.
    } else if (dif < 0) {
      dropped_.fetch_add(1, std::memory_order_relaxed);
      return Slot();
    } else {
      pos = write_pos_.load(std::memory_order_relaxed);
    }
  }
}

void SampleRing::Publish(const Slot& slot) noexcept {
  written_.fetch_add(1, std::memory_order_relaxed);
  cell(slot.position).seq.store(slot.position + 1, std::memory_order_release);
}

size_t SampleRing::pending() const noexcept {
  uint64_t w = write_pos_.load(std::memory_order_relaxed);
  uint64_t r = read_pos_.load(std::memory_order_relaxed);
  return w > r ? static_cast<size_t>(w - r) : 0;
}

}  // namespace fathom
