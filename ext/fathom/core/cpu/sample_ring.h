// SampleRing: the fixed-size buffer CPU/wall samples are written into from
// a signal handler, and read from later with the GVL held.
//
// Each Ruby thread samples itself in its own SIGPROF handler, so several
// handlers (one per thread) may write at once: this is a bounded
// multi-producer, single-consumer queue in the style of Dmitry Vyukov's
// bounded MPMC queue. Every cell carries a sequence number; a producer
// claims a cell with one compare-and-swap on the write position, fills it,
// and publishes it by storing the next sequence number. Nothing allocates
// after construction and nothing waits: when the ring is full the sample is
// counted in dropped() and thrown away. A handler never runs twice on the
// same thread at once (SIGPROF is blocked during its own handler), and a
// producer that was interrupted between claim and publish only delays the
// consumer, which stops at that cell and takes it on its next drain.
//
// Frame handles are opaque words (Ruby VALUEs from rb_profile_frames,
// leaf first); the ring never interprets them.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>

#include "cpu/cpu_schema.h"

namespace fathom {

// What a thread was doing when it was sampled. The numbers are stored in
// records and profiles compare them: append only.
enum class ThreadState : uint8_t {
  kRunning = 0,   // held the GVL, running Ruby (or C called from Ruby)
  kGvlWait = 1,   // ready to run, waiting for the GVL (Ruby 3.2+ only)
  kBlocked = 2,   // released the GVL: sleeping, blocked on IO, a lock, a C call
  kGc = 3,        // stopped by a GC: ran it, or held or waited for the GVL while it ran
  kUnknown = 4,
  // On a CPU with the GVL released: C code under rb_nogvl (zlib, digests,
  // a C extension's own loop). Never recorded by the handler (the GVL events
  // only say "released"); the drain splits a blocked sample whose thread's
  // CPU clock advanced (AccountedParts below). Its pprof state label is
  // "running" (it is running, on a CPU) with the label gvl=released.
  kNoGvl = 5,
};
// "running", "gvl-wait", "blocked", "gc", "unknown"; kNoGvl is "running".
const char* ThreadStateName(ThreadState state);
constexpr int kThreadStateCount = 6;

enum class GvlSincePrevious : uint8_t { kUnknown = 0, kNotTaken, kTaken };

struct SampleHeader {
  int64_t time_ns = 0;        // CLOCK_MONOTONIC when the sample was taken
  int64_t cpu_delta_ns = 0;   // the thread's CPU clock since its previous sample
  int64_t wall_delta_ns = 0;  // CLOCK_MONOTONIC since its previous sample
  int32_t thread_id = 0;      // native (kernel) thread id
  uint16_t depth = 0;         // frames used
  ThreadState state = ThreadState::kUnknown;
  bool truncated = false;     // the stack had more than max_depth frames
  // No walk (a GC was running) and the thread was not stopped by it: it was
  // outside Ruby code (asleep, blocked, in C without the GVL), so its stack
  // is the one of its previous sample if it ran no Ruby code since
  // (gvl_since_previous), else the next one read (CpuAggregate::Add).
  bool stack_from_previous = false;
  // Ruby 3.2+ (GVL events): whether the thread took the GVL since its
  // previous sample, i.e. could have run Ruby code and moved. Before 3.2
  // nobody knows (CpuAggregate then judges by its CPU clock).
  GvlSincePrevious gvl_since_previous = GvlSincePrevious::kUnknown;
  // Wall mode: the thread made no voluntary context switch since its
  // previous sample (its ru_nvcsw did not move): whatever part of the
  // interval it spent off a CPU, it was waiting for a CPU, not for I/O, a
  // lock or a timer. A blocked sample with this set is C code running
  // without the GVL on a busy machine (AccountedParts). False when unknown.
  bool stayed_runnable = false;
  // Not a sample: the thread's stack, read when it took the GVL back after
  // a sample taken during a GC (cpu_sampler.cc's TakeStackProbe). No time,
  // no count; it gives that sample its stack.
  bool stack_probe = false;
  // Native PCs (CaptureNativePcs, innermost first) when the ring was made
  // with native_max > 0: set by Claim to the cell's own array.
  uintptr_t* native = nullptr;
  uint16_t native_depth = 0;
  // The thread's labels when it was sampled (cpu_schema.h): the request
  // labels and span id the handler reads from two thread-local words.
  CpuLabels labels;
};

// kCpu: each thread's timer runs on its own CPU clock; kWall: on
// CLOCK_MONOTONIC.
enum class CpuMode : uint8_t { kCpu = 0, kWall };

// How a drained sample is accounted. The handler records the state the GVL
// events gave; a "blocked" thread whose CPU clock advanced was on a CPU
// without the GVL for that long, so that part is kNoGvl and the rest
// blocked. In wall mode, below a tenth of the wall delta the CPU is the
// thread's own waking up and going back to sleep (and our handler), not
// work: the sample stays blocked whole, so a sleeper has no "running"
// crumbs. In CPU mode the timer fired because the thread was on a CPU: its
// CPU time is never blocked.
struct AccountedPart {
  ThreadState state;
  CpuValues values;  // samples, cpu_ns, wall_ns
};
// One or two parts (the larger one carries the sample count); returns how
// many were written to parts.
int AccountedParts(const SampleHeader& h, CpuMode mode, AccountedPart parts[2]);
// The state a timeline shows for the sample: running without the GVL when
// the thread was on a CPU for a tenth of it or more, or stayed runnable (the
// first part), whichever part is larger; blocked when only the absolute
// crumbs floor put it on a CPU. A timeline draws each sample's CPU delta as the height of its
// activity graph in the sample's category colour (Firefox, as Gecko does
// for its own threads: the category says what the thread was doing, the
// height how much of a CPU it got). Counted by majority, a thread in
// Zlib::Deflate.deflate that got 29% of a CPU beside a CPU hog was
// "Blocked / sleeping" in every sample, a category Firefox draws
// transparent: 434 ms of its CPU vanished from the graph. pprof keeps the
// exact split (AccountedParts).
ThreadState TimelineState(const SampleHeader& h, CpuMode mode);

class SampleRing {
 public:
  // capacity is rounded up to a power of two (at least 2). native_max: room
  // for that many native PCs per cell (0: none, header.native stays null).
  SampleRing(size_t capacity, size_t max_depth, size_t native_max = 0);
  SampleRing(const SampleRing&) = delete;
  SampleRing& operator=(const SampleRing&) = delete;

  // A claimed cell for a producer to fill. frames/lines have room for
  // max_depth entries.
  struct Slot {
    SampleHeader* header = nullptr;
    uint64_t* frames = nullptr;
    int32_t* lines = nullptr;
    uint64_t position = 0;
    explicit operator bool() const { return header != nullptr; }
  };

  // Producer side, async-signal-safe. Claim() returns an empty Slot (and
  // counts a drop) when the ring is full; a claimed slot must be Publish()ed.
  Slot Claim() noexcept;
  void Publish(const Slot& slot) noexcept;

  // Consumer side (one consumer at a time). Calls f(header, frames, lines)
  // for each published record in order and frees its cell; stops at the
  // first cell still being written. Returns how many were consumed.
  template <typename F>
  size_t Drain(F&& f) {
    size_t n = 0;
    for (;;) {
      uint64_t pos = read_pos_.load(std::memory_order_relaxed);
      Cell& c = cell(pos);
      if (c.seq.load(std::memory_order_acquire) != pos + 1) break;
      f(static_cast<const SampleHeader&>(c.header), frames_of(pos), lines_of(pos));
      c.seq.store(pos + capacity_, std::memory_order_release);
      read_pos_.store(pos + 1, std::memory_order_relaxed);
      n++;
    }
    return n;
  }

  // Published records not yet drained, without consuming them (the GC
  // mark function pins their frame handles).
  template <typename F>
  void ForEachPending(F&& f) const {
    for (uint64_t pos = read_pos_.load(std::memory_order_relaxed);; pos++) {
      const Cell& c = cell(pos);
      if (c.seq.load(std::memory_order_acquire) != pos + 1) break;
      f(static_cast<const SampleHeader&>(c.header), frames_of(pos), lines_of(pos));
    }
  }

  // Approximate number of claimed cells not yet drained.
  size_t pending() const noexcept;
  size_t capacity() const { return capacity_; }
  size_t max_depth() const { return max_depth_; }
  size_t native_max() const { return native_max_; }
  uint64_t dropped() const noexcept { return dropped_.load(std::memory_order_relaxed); }
  uint64_t written() const noexcept { return written_.load(std::memory_order_relaxed); }

 private:
  struct Cell {
    std::atomic<uint64_t> seq{0};
    SampleHeader header;
  };
  Cell& cell(uint64_t pos) { return cells_[pos & (capacity_ - 1)]; }
  const Cell& cell(uint64_t pos) const { return cells_[pos & (capacity_ - 1)]; }
  uint64_t* frames_of(uint64_t pos) const { return frames_.get() + (pos & (capacity_ - 1)) * max_depth_; }
  int32_t* lines_of(uint64_t pos) const { return lines_.get() + (pos & (capacity_ - 1)) * max_depth_; }
  uintptr_t* native_of(uint64_t pos) const {
    return native_max_ == 0 ? nullptr : native_.get() + (pos & (capacity_ - 1)) * native_max_;
  }

  size_t capacity_;
  size_t max_depth_;
  size_t native_max_;
  std::unique_ptr<Cell[]> cells_;
  std::unique_ptr<uint64_t[]> frames_;
  std::unique_ptr<int32_t[]> lines_;
  std::unique_ptr<uintptr_t[]> native_;
  std::atomic<uint64_t> write_pos_{0};
  std::atomic<uint64_t> read_pos_{0};  // written by the consumer only; atomic for pending()
  std::atomic<uint64_t> dropped_{0};
  std::atomic<uint64_t> written_{0};
};

static_assert(std::atomic<uint64_t>::is_always_lock_free, "the signal handler needs lock-free 64-bit atomics");

}  // namespace fathom
