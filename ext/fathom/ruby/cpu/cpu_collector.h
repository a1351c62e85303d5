// The state of a Fathom::Native::CpuCollector, shared by the two files of
// the class: cpu_collector.cc (the Ruby class, its GC glue, start, stop,
// the drain job, flush) and cpu_window.cc (a window's data taken out of the
// aggregate: symbolized, waits relabelled on 3.1, C frames woven, threads
// named).
#pragma once

#include <ruby.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>

#include "cpu/cpu_aggregate.h"
#include "cpu/cpu_profile.h"
#include "cpu/sample_ring.h"
#include "ruby/cpu/cpu_sampler.h"

namespace fathom {

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

// The collector the sampler writes into (GVL held to change it).
extern CpuCollector* g_active_cpu;

namespace cpu {

// Moves the ring's records into the aggregate. GVL held.
void Drain(CpuCollector* c);
// Starts a new window (its start times).
void ResetWindow(CpuCollector* c);
// "worker" / "main" / "thread 1234": the thread's name label.
std::string NameOf(VALUE thread, int32_t tid);
// This window's data (drained first), and a new window starts.
CpuProfileData TakeData(CpuCollector* c);
void InitWindow();

}  // namespace cpu
}  // namespace fathom
