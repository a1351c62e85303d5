// The labels a CPU/wall sample records (CpuLabels, core/cpu/cpu_schema.h),
// read by the SIGPROF handler (cpu_sampler.cc) on the sampled thread: only
// loads of that thread's own thread-locals, nothing that allocates, locks
// or calls Ruby. A new label is recorded here, beside its field in
// CpuLabels.
#pragma once

#include "cpu/cpu_schema.h"
#include "ruby/labels/thread_labels.h"

namespace fathom {

inline CpuLabels ReadLabels() {
  ThreadLabels request = CurrentThreadLabels();  // two thread-local loads (labels/)
  CpuLabels labels;
  labels.label_set = request.label_set;
  labels.span_id = request.span_id;
  return labels;
}

}  // namespace fathom
