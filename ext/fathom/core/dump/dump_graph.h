// Builds a HeapGraph (retention/heap_graph.h) from a DumpHeap: breadth-first
// from the ROOT records' references, each object's references as its edges,
// so that the dominators, retained sizes and retention profile of the
// in-process snapshot apply unchanged.
//
// Names, as far as a dump allows (it has no edge names):
//   class of a node   the "name" of the CLASS record its "class" points to
//                     ("<imemo>", "<hidden String>" like the snapshot);
//   edge to a class or module   its name ("LeakFixture::Registry");
//   edge to a string  the name the rules below give it, plus (only with
//                     DumpAnalysisOptions::string_contents: a value is the
//                     program's data) a short prefix
//                     of its value cut before the first digit
//                     ("via Hash \"session-…\"") when that prefix is among
//                     the kMaxNamedPrefixes most common (dump_heap.h);
//   edge from a root category   "in <category>";
//   edge from a named class or module   "in <name>" (a constant, class
//                     ivar or method cache: the dump does not say which);
//   any other edge    "via <referrer's class>".
// Instance variable, constant, hash key and array index names are not in a
// dump: DumpGraphStats::unavailable_names lists them for the report.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "dump/dump_heap.h"
#include "retention/heap_graph.h"

namespace fathom {

struct DumpGraphStats {
  uint64_t dangling_references = 0;  // references to addresses not in the dump
  uint64_t first_dangling_address = 0;
  uint64_t unreachable_objects = 0;  // in the dump, not reachable from a root
  uint64_t unreachable_bytes = 0;
  size_t peak_bytes = 0;             // DumpHeap + index + walk arrays at the peak
  uint64_t string_prefixes = 0;      // distinct string prefixes seen (at most DumpHeap::kMaxPrefixes)
  uint64_t named_string_prefixes = 0;  // of which name strings (the most common)
};

// Consumes `heap`'s per-object arrays as it goes (references, classes,
// sizes...), so that the dump's and the graph's arrays are never all
// resident at once; what is left is for the caller to drop (address, type,
// name, site, generation, the name tables).
HeapGraph BuildDumpGraph(DumpHeap& heap, DumpGraphStats* stats = nullptr);

// Names missing from dump-based frames, for the report.
extern const char* const kDumpUnavailableNames;

}  // namespace fathom
