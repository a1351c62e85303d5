// The Init functions Init_fathom_ext (fathom_ext.cc) calls: each defines
// the Ruby classes and module functions of one file, named after them.
#pragma once

#include <ruby.h>

namespace fathom {

// runtime/: Fathom::Native.ractor_check (runtime/ractor_guard.cc).
void InitRactorGuard(VALUE mNative);

// heap/: Fathom::Native.before_fork / after_fork_parent (heap/heap_tick.cc:
// the heap tick is what they pause) and Fathom::Native::HeapCollector
// (heap/heap_collector.cc).
void InitHeapTick(VALUE mNative);
void InitHeapCollector(VALUE mNative);

// gc/: Fathom::Native::GcCollector (gc/gc_collector.cc).
void InitGcCollector(VALUE mNative);

// cpu/: Fathom::Native::CpuCollector and Fathom::Native.internal_thread
// (cpu/cpu_collector.cc).
void InitCpuCollector(VALUE mNative);

// io/: Fathom::Native::FirefoxParts (io/firefox_parts.cc) and
// Fathom::Native.write_new_file: core/io/new_file.h with the GVL released
// (io/write_new_file.cc).
void InitFirefoxParts(VALUE mNative);
void InitNewFile(VALUE mNative);

// retention/: Fathom::Native::RetentionSnapshot
// (retention/retention_snapshot.cc) and Fathom::Native.malloc_trim: glibc's
// malloc_trim(0) with the GVL released (retention/malloc_trim.cc).
void InitRetentionSnapshot(VALUE mNative);
void InitMallocTrim(VALUE mNative);
// Fathom::Native.with_stack_scrubbed (retention/stack_scrub.cc): what a
// snapshot runs its Ruby preparation in.
void InitStackScrub(VALUE mNative);

void InitThreadLabels(VALUE mNative);

// leaks/: Fathom::Native.process_memory: RSS and glibc's mallinfo2
// (core/leaks/process_memory.h), recorded beside each heap window
// (leaks/process_memory_method.cc).
void InitProcessMemory(VALUE mNative);

#ifdef FATHOM_DUMP_READER
// dump/: Fathom::Native.analyze_dump / diff_dumps (dump/dump_methods.cc,
// over core/dump/dump_analysis.h). Only built with simdjson (extconf.rb).
void InitDumpAnalysis(VALUE mNative);
// Fathom::Native.heap_dump_forked (dump/forked_dump.cc), called by InitDumpAnalysis.
void InitForkedDump(VALUE mNative);
#endif

}  // namespace fathom
