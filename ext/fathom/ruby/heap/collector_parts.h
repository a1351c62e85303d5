// The parts of a HeapCollector (heap_collector.h) that one mechanism owns,
// each a struct of its own named for the file that uses it, so that a field
// says who reads and writes it. The collector's lifecycle
// (heap_collector.cc) only sizes, clears and reports them. What everyone
// shares (the configuration, the run flags, the sample store, the liveness
// tokens, the census) stays in HeapCollector itself.
#pragma once

#include <ruby.h>

#include <cstddef>
#include <cstdint>
#include <unordered_map>
#include <vector>

#include "heap_sampling/byte_thinning.h"
#include "heap_sampling/tick_accounting.h"

namespace fathom {

// allocation_hooks.cc: what the NEWOBJ hook and the arm job keep.
struct HookState {
  // Sampled mode: the allocation count at the previous sample (a sample
  // weighs the allocations since), the allocations still to skip before
  // the next candidate, and the records of the burst in progress
  // (reserved at start so the hook never grows it).
  size_t last_total_allocated = 0;
  uint32_t skip_countdown = 0;
  std::vector<uint32_t> burst;
  // Capture buffers, sized at start so the hook never allocates them.
  std::vector<VALUE> frames;
  std::vector<int> lines;
  std::vector<uint64_t> handles;
  uint64_t samples_taken = 0;
  uint64_t bursts = 0;  // since initialize
};

// sample_commit.cc: what committing a pending record needs besides the
// store: the thinning of candidates by bytes and the label caches.
struct CommitState {
  // Sampled mode thins a burst's candidates by bytes at commit
  // (heap_sampling/byte_thinning.h): it keeps a quarter of them on average,
  // i.e. the 16 samples a tick kept before candidates were thinned, and
  // every object of at least the threshold, which starts at 1 KB and
  // adapts to the process's sizes between one slot (40 B: below that all
  // are kept anyway) and 1 MB. Kept across start/stop, like the store.
  ByteThinning thinning{0.25, 40, 1 << 20, 1024};
  uint64_t thinned = 0;  // candidates dropped at commit

  // Class and thread labels by VALUE. Valid for one GC epoch only: a class
  // or thread can only be freed (and its address reused) by a GC.
  size_t label_cache_gc_count = SIZE_MAX;
  std::unordered_map<VALUE, uint32_t> class_labels;
  std::unordered_map<VALUE, uint32_t> thread_labels;
  // One-entry caches in front of the maps: allocation runs repeat the class.
  VALUE last_class = Qundef, last_thread = Qundef;
  uint32_t last_class_label = 0, last_thread_label = 0;

  uint64_t commits = 0;
  uint64_t untracked = 0;  // committed records whose object cannot be followed
  bool committing = false;  // CommitPending is not re-entrant
};

// heap_flush.cc: the window the next flush describes.
struct WindowState {
  int64_t start_realtime_ns = 0;
  int64_t start_mono_ns = 0;
  // Sampled mode: the timer's counters at the window's start and the
  // bursts armed since (heap_sampling/tick_accounting.h: did the ticks
  // reach Ruby?); the arm job counts the bursts.
  TickCounts ticks_at_start;
  uint64_t bursts = 0;
  // Freed records folded into totals since the last flush (by commits, and
  // by the flush itself).
  uint64_t drained_freed = 0;
  uint64_t flushes = 0;
};

}  // namespace fathom
