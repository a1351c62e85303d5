// GcTracker: turns Ruby's stream of GC steps into a few "periods" worth
// recording. Pure C++; the Ruby side feeds it from its GC hooks.
//
// Why coalesce. Ruby's GC is incremental and sweeps lazily: one GC cycle is
// many short steps (each one a GC_ENTER/GC_EXIT pair), and an allocation
// loop produces 50k+ steps per second. Making a sample per step would cost
// more than the GC itself. So steps are summed into the open *period*, and
// a period is closed (handed to the Ruby side to record) only
//   - when `flush_interval_ns` has passed since the last close (10 ms by
//     default: at most ~100 periods/s whatever the GC does), or
//   - when a major GC cycle has finished (flush_on_major), so that every
//     major GC — the expensive, interesting ones — is a period of its own, or
//   - when a cycle with a different type/reason/cause starts, so that the
//     labels of a period describe all of its steps.
// With flush_interval_ns == 0 every step is its own period ("coalescing
// off", used by the benchmark to show what coalescing saves).
//
// Idle steps. Ruby 3.3 and 3.4 enter and leave the GC (GC_ENTER, GC_EXIT)
// whenever a heap needs a new page, to continue a marking or a sweep if one
// is under way (heap_prepare calls gc_continue unconditionally; 3.1 only
// while sweeping, and later Rubies check first). With none under way the
// step does nothing: ~1 us of locking. 761 of 6,242 steps were such on
// 3.3.8 with 50 GC.start among churn (672 of 6,118 on 3.4.5, 4 of 8,525 on
// 3.1.2). They are not GC work (GC.stat(:time) does not count them either):
// they are counted in stats().idle_steps and left out of the periods and
// pauses; recorded, they took the last GC's labels ("major force" rows
// with more steps than GCs) and pulled the pause percentiles down.
//
// Threading and allocation. Every On* method runs inside Ruby's GC (GVL
// held, allocation forbidden): they only touch fields and a ring of
// closed periods preallocated by the constructor. Drain() runs at a safe
// point with the GVL (the Ruby side's postponed job), so the ring has a
// single producer and a single consumer that never run at the same time.
// When the ring is full (the job did not get to run), closed periods are
// merged into the newest ring entry instead of being dropped: totals stay
// exact, only the timeline loses resolution (stats().merged_on_overflow).
//
// CPU time. The thread CPU clock is a system call (no vDSO), too dear to
// read twice on every lazy-sweep step of 10-30 us; StepCpuSampler
// (step_cpu_sampler.h) picks the steps that read it and estimates the
// others. Always measured: every step of a major GC, including the one it
// starts in, from GC_START on when its start was not measured (a GC.start
// runs its whole major GC in one step, and that step's GC_ENTER comes before
// Ruby has chosen the GC's type). So a major GC's CPU, forced ones
// included, is the thread's own clock, and a period's cpu_ns is the sum of
// its steps' measured or estimated CPU times, each no more than its wall
// time.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "gc/pause_histogram.h"
#include "gc/step_cpu_sampler.h"

namespace fathom {

enum class GcType : uint8_t { kUnknown = 0, kMinor, kMajor };
// rb_gc_latest_gc_info(:major_by): why a major GC was chosen.
enum class GcReason : uint8_t { kNone = 0, kNofree, kOldgen, kShady, kForce, kOldmalloc, kUnknown };
// rb_gc_latest_gc_info(:gc_by): what triggered the GC.
// kUnseen: GCs that Ruby's counters show but whose cause nobody saw (the
// counters source knows only the latest GC's cause per read; its pprof
// labels the other type's GCs of that read with it; gc_profile.cc).
enum class GcCause : uint8_t { kUnknown = 0, kNewobj, kMalloc, kMethod, kCapi, kStress, kUnseen };

const char* GcTypeName(GcType type);      // "minor", "major", "unknown"
const char* GcReasonName(GcReason reason);  // "nofree", ..., "" for kNone
const char* GcCauseName(GcCause cause);    // "newobj", "malloc", "method", ...

// One closed period. Times are CLOCK_MONOTONIC nanoseconds.
struct GcPeriod {
  int64_t start_ns = 0;  // when the period's first step began
  int64_t end_ns = 0;    // when its last step ended
  int64_t wall_ns = 0;   // summed step durations (wall clock)
  int64_t cpu_ns = 0;    // CPU time of the GC-running thread during the steps (some estimated, see above)
  uint32_t steps = 0;
  uint32_t cycles_started = 0;   // GC cycles (GC.count increments) begun in the period
  uint32_t cycles_finished = 0;  // cycles whose sweep ended in the period
  GcType type = GcType::kUnknown;
  GcReason reason = GcReason::kNone;
  GcCause cause = GcCause::kUnknown;
  // heap_live_slots when the first cycle of the period started / when the
  // last one finished sweeping; -1 when not seen in this period.
  int64_t heap_live_before = -1;
  int64_t heap_live_after = -1;
  // Counters source only (gc_counter_poll.h): a period is one read of
  // Ruby's counters, which can hold GCs of both types; these say how many
  // of each (cycles_started is their sum, type the latest GC's). The
  // tracker's periods have a single type and leave both 0.
  uint32_t minor_gcs = 0;
  uint32_t major_gcs = 0;
};

class GcTracker {
 public:
  struct Config {
    int64_t flush_interval_ns = 10 * 1000 * 1000;
    bool flush_on_major = true;
    size_t ring_capacity = 4096;
    uint32_t cpu_stride = 8;        // measure CPU on one minor-continuing step in this many (1: all)
    uint32_t cpu_hot_steps = 1024;  // then measure all this many after a descheduled one (step_cpu_sampler.h)
  };
  struct Stats {
    uint64_t steps = 0;
    uint64_t cycles = 0;
    uint64_t periods_closed = 0;
    uint64_t merged_on_overflow = 0;  // closed periods folded into another because the ring was full
    uint64_t unmatched_exits = 0;     // GC_EXIT without GC_ENTER (tracking began mid-step)
    uint64_t idle_steps = 0;          // GC_ENTER/GC_EXIT with no GC under way (not recorded; see above)
    uint64_t cpu_measured_steps = 0;  // steps whose CPU clock was read (the others are estimated)
    uint64_t descheduled_steps = 0;   // measured steps the thread spent mostly off the CPU
  };

  explicit GcTracker(Config config);

  // ---- called from GC hooks: no allocation ----
  // The clocks are read by the caller, the CPU clock outside the wall
  // clock's readings: CPU then wall at a step's start (and at GC_START),
  // wall then CPU at its end. Reading the thread CPU clock makes the kernel
  // bring the thread's runtime up to date, and when its time slice has run
  // out, it is descheduled right there instead of at the next tick; read
  // inside the wall interval, that wait would count as GC time. (Measured
  // with the accuracy test's program at load 30 on 2 cores: with the
  // thread CPU clock read just inside a wall bracket around GC.start, 15 to
  // 20 of 50 brackets held a wait of 4-90 ms before the GC began; read
  // outside, none of 150.) The CPU interval then holds the wall interval
  // plus two clock reads: the sampler clamps a step's CPU to its wall time.
  //
  // Whether the step about to begin should read the CPU clock at its start.
  bool WantsCpu() const;
  // GC_ENTER: a step begins at wall_ns; cpu_ns is the CPU clock if
  // WantsCpu() (0 otherwise, or when the read failed).
  void OnStepEnter(int64_t wall_ns, int64_t cpu_ns);
  // GC_START: a cycle begins (inside the step that started it). Afterwards,
  // StepNeedsCpuStart() says whether to read the CPU clock now.
  void OnCycleStart(GcType type, GcReason reason, GcCause cause, int64_t heap_live_slots);
  // Whether the step in progress still needs a CPU clock reading: it is a
  // major GC's (it starts one) and its start was not measured.
  bool StepNeedsCpuStart() const { return in_step_ && step_exact_ && step_cpu_start_ <= 0; }
  // The CPU clock read cpu_ns (just before wall_ns), inside the step in
  // progress: the step's CPU is measured from here. cpu_ns <= 0 (a failed
  // read) is ignored.
  void OnStepCpuStart(int64_t wall_ns, int64_t cpu_ns);
  // Whether the step in progress has a CPU reading to end (read it at exit).
  bool StepCpuMeasured() const { return step_cpu_start_ > 0; }
  // GC_END_SWEEP: the current cycle finished sweeping.
  void OnCycleEnd(int64_t heap_live_slots);
  // GC_EXIT: the step ends; cpu_ns is the CPU clock if StepCpuMeasured()
  // (0 otherwise, or when the read failed: the step is then estimated).
  // Returns true when a period was closed, i.e. the caller should schedule
  // Drain() at the next safe point.
  bool OnStepExit(int64_t wall_ns, int64_t cpu_ns);

  // ---- called at safe points ----
  // Moves the closed periods, oldest first, to the end of *out.
  void Drain(std::vector<GcPeriod>* out);
  // Closes the open period if it has any step (at stop). Returns whether one was closed.
  bool CloseOpenPeriod();
  // Forgets everything (after fork in the child, or on restart).
  // gc_in_progress: whether a GC cycle is under way (Ruby's
  // GC.latest_gc_info(:state) is not :none); true when not known, so that
  // the steps of a cycle begun before tracking count.
  void Reset(int64_t now_ns, bool gc_in_progress = true);
  // After a pause in tracking (a restart): what Ruby says now.
  void SyncGcInProgress(bool gc_in_progress) { cycle_in_progress_ = gc_in_progress; }
  // Starts a new pause histogram (a flush window ended); stats are kept.
  void ClearPauses() { pauses_.Clear(); }

  const PauseHistogram& pauses() const { return pauses_; }
  const Stats& stats() const { return stats_; }
  const Config& config() const { return config_; }
  bool in_step() const { return in_step_; }

 private:
  void Close();  // pushes open_ into the ring and resets it

  Config config_;
  GcPeriod open_;
  bool in_step_ = false;
  int64_t step_wall_start_ = 0;
  // The step's CPU clock reading and the wall time it was taken at (the
  // step's start, or its GC_START); 0: not measured.
  int64_t step_cpu_start_ = 0, step_cpu_wall_start_ = 0;
  // The step belongs to a major GC (or starts one): always measured, and
  // not like the steps the sampler leaves unmeasured.
  bool step_exact_ = false;
  StepCpuSampler cpu_sampler_;
  bool major_finished_in_period_ = false;
  // Between a major GC's GC_START and its GC_END_SWEEP: its steps are all
  // measured. (Not the open period's type, which outlives the GC.)
  bool major_in_progress_ = false;
  // Between any GC's GC_START and its GC_END_SWEEP; a step that began
  // outside one and started none is idle.
  bool cycle_in_progress_ = true;
  bool step_idle_ = false;
  int64_t last_close_ns_ = 0;

  std::vector<GcPeriod> ring_;  // capacity fixed at construction
  size_t ring_head_ = 0, ring_size_ = 0;

  PauseHistogram pauses_;
  Stats stats_;
};

}  // namespace fathom
