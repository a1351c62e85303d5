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

// Paces the heap sampler's ticks by the CPU time of Ruby code, not by the
// wall clock. Allocations happen only while a thread runs Ruby on a CPU; a
// tick per wall interval gave more samples per allocation whenever that
// thread was off a CPU while holding or passing the GVL (the machine busy
// with other processes, threads in C without the GVL taking the cores), so
// the sampler cost most when the machine had least to spare, and sample
// counts depended on what the other threads did. The timer still wakes
// every interval; it ticks once an interval of Ruby CPU has been used since
// the last tick.
//
// Two ways to know that CPU:
//  - WakeHeld (Ruby 3.2+): the summed CPU of GVL holds, which the GVL hook
//    measures at each handover (gvl_owner.cc). Exact: CPU a thread spends
//    in C without the GVL is not in it, however often the GVL changes hands.
//  - Wake (3.1, no GVL events): the CPU clock of the runner, the thread that
//    last ran the tick's job (it held the GVL then). Each runner's last
//    reading is kept, so a runner coming back is credited its CPU since
//    then rather than ticking at once (one early tick per handover gave
//    1.3x the samples per CPU second beside threads that take the GVL
//    between C calls, on a loaded machine). A thread never seen is due at
//    once. A runner whose CPU clock did not move in a whole wake period is
//    not running Ruby: Stalled() says so, and the caller looks for another
//    thread by the old wall tick.
class TickPacer {
 public:
  explicit TickPacer(int64_t interval_ns) : interval_ns_(interval_ns) {}
  enum class Verdict { kTick, kWait, kStalled };
  // One wake-up (3.1): the runner's id and its CPU clock now (0: unreadable).
  Verdict Wake(int runner, int64_t cpu_ns);
  // One wake-up (3.2+): whether a thread holds the GVL, and the Ruby CPU
  // (GVL holds) so far. A reading taken across a handover can come out a
  // little low; the pacer keeps the highest one as its base.
  Verdict WakeHeld(bool owner, int64_t held_cpu_ns);
  void Reset() {
    runner_ = 0, owed_ns_ = 0, held_base_ns_ = -1;
    for (Reading& r : readings_) r = Reading{};
  }

 private:
  struct Reading {
    int tid = 0;
    int64_t cpu_ns = 0;
  };
  // Credits `used` and says whether a tick is due.
  Verdict Credit(int64_t used);
  Reading* Find(int tid);
  Reading* Slot(int tid);  // a free or the oldest-used slot

  int64_t interval_ns_;
  int runner_ = 0;
  int64_t owed_ns_ = 0;  // Ruby CPU since the last tick
  int64_t held_base_ns_ = -1;
  static constexpr int kReadings = 8;
  Reading readings_[kReadings];
  int next_slot_ = 0;
};

}  // namespace fathom
