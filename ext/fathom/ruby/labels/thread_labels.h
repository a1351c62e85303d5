// The request labels current on the calling native thread, as the samplers
// read them: a LabelSets id (core/labels/label_sets.h; 0: none) and a span
// id (0: none). Fathom::Labels (lib/fathom/labels.rb) sets them through
// Fathom::Native::Labels; the SIGPROF handler (ruby/cpu/cpu_sampler.cc)
// and the NEWOBJ hook of a sampled allocation (ruby/heap/allocation_hooks.cc)
// read them on the thread they sample: two thread-local loads, no
// allocation, no lock, no Ruby call, so async-signal-safe.
//
// Per native thread. On Ruby 3.1 and 3.3 (M:N threads off, the default) a
// Ruby thread runs on one native thread for its whole life, so this is per
// Ruby thread. Fibers of one thread share it: Labels.with restores on the
// way out of its block, but a fiber switch inside the block (an Async/
// Falcon scheduler) shows the other fiber's samples under these labels.
// With M:N threads (3.3 RUBY_MN_THREADS=1) a Ruby thread may move to another
// native thread and its labels would stay behind: not supported (see
// docs/internals/labels.md).
#pragma once

#include <cstdint>

#include <ruby.h>

namespace fathom {

struct ThreadLabels {
  uint32_t label_set;
  uint64_t span_id;
};

// Async-signal-safe.
ThreadLabels CurrentThreadLabels();

// Fathom::Native::Labels.
void InitThreadLabels(VALUE mNative);

}  // namespace fathom
