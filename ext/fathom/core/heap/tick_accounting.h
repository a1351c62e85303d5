// What became of the heap sampler's timer ticks in one window, and the
// profile comment that says it. A tick starts a burst of samples when its
// job runs on the thread holding the GVL; it legitimately starts none when
// the previous tick's burst still waits for an allocation (nothing was
// allocated since: nothing to sample) or when no thread runs Ruby code.
// Every other tick that started no burst was lost on its way to Ruby: the
// sample is then sparser than the interval says, and biased towards the
// moments ticks did get through. `fathom report` reads the comment back and
// warns when most ticks were lost (lib/fathom/report/top.rb).
#pragma once

#include <cstdint>
#include <string>

namespace fathom {

struct TickCounts {
  uint64_t ticks = 0;        // timer ticks in the window
  uint64_t armed_skips = 0;  // ... skipped: a burst was already armed
  uint64_t idle = 0;         // ... skipped: no thread ran Ruby code on a CPU for an interval
  uint64_t bursts = 0;       // bursts armed by the job

  // Ticks that should each have started a burst.
  uint64_t eligible() const {
    uint64_t skipped = armed_skips + idle;
    return ticks > skipped ? ticks - skipped : 0;
  }
  // Eligible ticks that started no burst.
  uint64_t lost() const { return eligible() > bursts ? eligible() - bursts : 0; }
};

// "Sampling: 498 bursts from 500 timer ticks that could start one (of 530;
// 30 while a burst waited for an allocation, 0 with no thread running
// Ruby)". Parsed by `fathom report`: keep the leading words stable.
// (A wake-up of the timer is a tick; TickPacer's waits count as idle.)
std::string TickComment(const TickCounts& counts);

// Whether the window lost so many ticks that its sample is much sparser
// than the interval promises: more than half of at least 20 eligible ticks
// (fewer say too little to warn about).
bool MostTicksLost(const TickCounts& counts);

// Paces the heap sampler's ticks by the CPU time of the thread running Ruby
// code, not by the wall clock. Allocations happen only while a thread runs
// Ruby on a CPU; a tick per wall interval gave more samples per allocation
// whenever that thread was off a CPU while holding or passing the GVL (the
// machine busy with other processes, threads in C without the GVL taking
// the cores), so the sampler cost most when the machine had least to spare,
// and sample counts depended on what the other threads did. The timer still
// wakes every interval; it ticks once the runner has used an interval of
// CPU since the last tick.
//
// The runner is the GVL owner (Ruby 3.2+) or the thread that last ran the
// tick's job (3.1). A new runner is due at once (its CPU since it took over
// is unknown; one early tick per handover). A runner whose CPU clock did not
// move in a whole wake period is not running Ruby: Stalled() says so, and
// the caller decides (3.1 then looks for another thread by the old wall
// tick; 3.2+ knows the owner is off a CPU and waits).
class TickPacer {
 public:
  explicit TickPacer(int64_t interval_ns) : interval_ns_(interval_ns) {}
  enum class Verdict { kTick, kWait, kStalled };
  // One wake-up: the runner's id and its CPU clock now (0: unreadable).
  Verdict Wake(int runner, int64_t cpu_ns);
  void Reset() { runner_ = 0, last_cpu_ns_ = 0, owed_ns_ = 0; }

 private:
  int64_t interval_ns_;
  int runner_ = 0;
  int64_t last_cpu_ns_ = 0;
  int64_t owed_ns_ = 0;  // the runner's CPU since the last tick
};

}  // namespace fathom
