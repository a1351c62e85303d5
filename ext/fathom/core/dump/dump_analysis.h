// `fathom analyze`: a dump file in, the retention profile of the in-process
// snapshot out (dominator paths as stacks), plus live bytes and counts by
// allocation site and by generation when the dump has them, and the
// three-dump diff. Pure C++: the Ruby binding runs it without the GVL.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "dump/dump_graph.h"
#include "dump/dump_reader.h"

namespace fathom {

struct DumpTally {
  std::string key;  // "file:line", a generation number, or a class name
  uint64_t objects = 0;
  uint64_t bytes = 0;
};

struct DumpAnalysisOptions {
  uint32_t max_depth = 64;
  size_t top = 20;  // rows kept in each table
  int progress_fd = -1;  // >= 0: a progress line ("\r...") on this fd
  bool dom_parser_only = false;  // see DumpReadOptions::dom_parser_only
  // Name STRING objects by the start of their value ("via Session
  // \"pppp…\""). Off by default: a dump holds the program's data (API keys,
  // passwords, emails), and the profile and tables must not carry it on;
  // `fathom analyze --string-contents` opts in for local debugging.
  bool string_contents = false;
};

struct DumpPhase {
  const char* name;
  uint64_t nanos;      // wall time
  uint64_t cpu_nanos;  // this thread's CPU time (the analysis runs on one thread)
  uint64_t hwm_bytes;  // the process's peak resident size (VmHWM) at the phase's end; 0 if unknown
};

struct DumpAnalysis {
  std::string profile;  // gzipped pprof (retention sample types)
  DumpReadStats read;
  DumpGraphStats graph;
  uint64_t objects = 0, bytes = 0;           // every object in the dump
  uint64_t reachable_objects = 0, reachable_bytes = 0;
  bool has_sites = false, has_generations = false;
  std::vector<DumpTally> sites;              // by bytes, top N
  std::vector<DumpTally> generations;        // by generation, oldest first
  std::vector<DumpPhase> phases;
  size_t peak_bytes = 0;                     // largest sum of our own arrays at once
};

DumpAnalysis AnalyzeDump(const std::string& path, const DumpAnalysisOptions& options = {});

// The three-dump technique: objects of `b` that were not in `a` (same
// address and generation: an address reused by a later allocation has a
// later generation), and, with `c`, that are still in `c`. Grouped by
// allocation site (class name when the dump has no site) and by the
// dominator path in the last dump's graph.
struct DumpDiff {
  uint64_t new_objects = 0, new_bytes = 0;
  bool has_sites = false, has_generations = false;
  std::vector<DumpTally> by_site;  // bytes, top N
  std::vector<DumpTally> by_path;  // bytes, top N; key = frames root first, joined with " ⇢ "
  std::vector<DumpPhase> phases;
};

DumpDiff DiffDumps(const std::vector<std::string>& paths, const DumpAnalysisOptions& options = {});

}  // namespace fathom
