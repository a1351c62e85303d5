#include "dump/dump_analysis.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cinttypes>
#include <cstdio>
#include <ctime>
#include <unordered_map>

#include "retention/dominators.h"
#include "retention/retention_profile.h"

namespace fathom {

namespace {

uint64_t Now() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch()).count());
}

// One line on a terminal, rewritten in place ("\r"); never fails the run.
class ProgressLine {
 public:
  explicit ProgressLine(int fd) : fd_(fd), start_(Now()) {}
  ~ProgressLine() { Clear(); }
  void Show(const char* phase, uint64_t bytes) {
    if (fd_ < 0) return;
    double secs = static_cast<double>(Now() - start_) / 1e9;
    char line[160];
    int n = bytes ? std::snprintf(line, sizeof line, "\rfathom analyze: %s, %.0f MB read, %.0f MB/s   ", phase,
                                  static_cast<double>(bytes) / 1e6, secs > 0 ? static_cast<double>(bytes) / 1e6 / secs : 0.0)
                  : std::snprintf(line, sizeof line, "\rfathom analyze: %s...%30s", phase, "");
    Write(line, n);
    shown_ = true;
  }
  void Clear() {
    if (fd_ >= 0 && shown_) Write("\r\033[K", 4);
    shown_ = false;
  }

 private:
  void Write(const char* s, int n) {
    if (n > 0 && ::write(fd_, s, static_cast<size_t>(n)) < 0) fd_ = -1;
  }
  int fd_;
  uint64_t start_;
  bool shown_ = false;
};

uint64_t ThreadCpuNow() {
  struct timespec ts;
  if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0) return 0;
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000u + static_cast<uint64_t>(ts.tv_nsec);
}

// The process's VmHWM (Linux /proc; 0 elsewhere): what the memory goal is
// about, beyond the arrays this code counts itself (allocator slack,
// transient copies). Read a few times per analysis, so its cost is nil.
uint64_t PeakResidentBytes() {
  FILE* f = std::fopen("/proc/self/status", "r");
  if (!f) return 0;
  char line[256];
  uint64_t kb = 0;
  while (std::fgets(line, sizeof line, f))
    if (std::sscanf(line, "VmHWM: %" SCNu64 " kB", &kb) == 1) break;
  std::fclose(f);
  return kb * 1024;
}

// Wall and CPU time per phase: on a loaded machine CPU time is the figure
// that says what the code costs.
class PhaseClock {
 public:
  explicit PhaseClock(std::vector<DumpPhase>* phases) : phases_(phases), t_(Now()), cpu_(ThreadCpuNow()) {}
  void End(const char* name) {
    uint64_t now = Now(), cpu = ThreadCpuNow();
    phases_->push_back(DumpPhase{name, now - t_, cpu - cpu_, PeakResidentBytes()});
    t_ = now;
    cpu_ = cpu;
  }

 private:
  std::vector<DumpPhase>* phases_;
  uint64_t t_, cpu_;
};

std::vector<DumpTally> Top(std::vector<DumpTally> rows, size_t top) {
  std::sort(rows.begin(), rows.end(), [](const DumpTally& a, const DumpTally& b) {
    return a.bytes != b.bytes ? a.bytes > b.bytes : a.key < b.key;
  });
  if (rows.size() > top) rows.resize(top);
  return rows;
}

DumpHeap Read(const std::string& path, const DumpAnalysisOptions& options, ProgressLine& progress,
             DumpReadStats* stats) {
  DumpReadOptions ro;
  ro.dom_parser_only = options.dom_parser_only;
  if (!options.string_contents) ro.string_prefix_bytes = 0;  // no value reaches a name
  ro.progress = [&](uint64_t bytes) { progress.Show("parse", bytes); };
  return ReadDump(path, ro, stats);
}

// Address + generation of every object of a dump, sorted, for membership.
std::vector<std::pair<uint64_t, uint32_t>> Keys(const DumpHeap& h) {
  std::vector<std::pair<uint64_t, uint32_t>> keys(h.size());
  for (size_t i = 0; i < h.size(); i++)
    keys[i] = {h.address[i], h.has_generations ? h.generation[i] : DumpHeap::kNoGeneration};
  std::sort(keys.begin(), keys.end());
  return keys;
}

bool Contains(const std::vector<std::pair<uint64_t, uint32_t>>& keys, uint64_t a, uint32_t gen) {
  return std::binary_search(keys.begin(), keys.end(), std::make_pair(a, gen));
}

}  // namespace

DumpAnalysis AnalyzeDump(const std::string& path, const DumpAnalysisOptions& options) {
  DumpAnalysis r;
  ProgressLine progress(options.progress_fd);
  PhaseClock clock(&r.phases);
  int64_t wall = static_cast<int64_t>(
      std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::system_clock::now().time_since_epoch()).count());

  DumpHeap heap = Read(path, options, progress, &r.read);
  clock.End("parse");
  r.peak_bytes = heap.MemoryBytes();
  r.objects = heap.size();
  for (uint32_t m : heap.memsize) r.bytes += m;
  r.has_sites = heap.has_sites;
  r.has_generations = heap.has_generations;

  // Sites and generations count every object of the dump, reachable or not:
  // a dump is taken without a GC first as often as with one.
  if (heap.has_sites) {
    std::vector<DumpTally> by_site(heap.sites.size());  // per site id
    for (size_t i = 0; i < heap.size(); i++) {
      DumpTally& t = by_site[heap.site[i]];
      t.objects++;
      t.bytes += heap.memsize[i];
    }
    std::vector<DumpTally> rows;
    for (uint32_t s = 1; s < by_site.size(); s++)
      if (by_site[s].objects) rows.push_back(DumpTally{heap.SiteName(s), by_site[s].objects, by_site[s].bytes});
    r.sites = Top(std::move(rows), options.top);
  }
  if (heap.has_generations) {
    std::unordered_map<uint32_t, DumpTally> by_gen;
    for (size_t i = 0; i < heap.size(); i++) {
      DumpTally& t = by_gen[heap.generation[i]];
      t.objects++;
      t.bytes += heap.memsize[i];
    }
    std::vector<std::pair<uint32_t, DumpTally>> rows(by_gen.begin(), by_gen.end());
    std::sort(rows.begin(), rows.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    for (auto& g : rows) {
      g.second.key = g.first == DumpHeap::kNoGeneration ? "(none)" : std::to_string(g.first);
      r.generations.push_back(g.second);
    }
  }
  heap.site.Free();
  heap.generation.Free();
  clock.End("tables");

  progress.Show("graph", 0);
  HeapGraph g = BuildDumpGraph(heap, &r.graph);
  r.peak_bytes = std::max(r.peak_bytes, r.graph.peak_bytes);
  heap = DumpHeap{};
  clock.End("graph");

  progress.Show("dominators", 0);
  DominatorStats ds;
  MappedVector<uint32_t> idom = ComputeDominators(g, &ds);
  r.peak_bytes = std::max(r.peak_bytes, g.MemoryBytes() + ds.peak_bytes);
  g.ReleaseEdges();
  MappedVector<uint64_t> retained = RetainedSizes(g, idom);
  r.reachable_objects = g.node_count() - g.first_object_node();
  r.reachable_bytes = retained.empty() ? 0 : retained[HeapGraph::kSuperRoot];
  clock.End("dominators");

  progress.Show("encode", 0);
  RetentionProfileOptions po;
  po.max_depth = options.max_depth;
  po.time_nanos = wall;
  po.comment = "fathom analyze " + path + ": names unavailable in a heap dump: " + kDumpUnavailableNames;
  RetentionProfileStats ps;
  r.profile = EncodeRetentionProfile(g, idom, retained, po, &ps);
  r.peak_bytes = std::max(r.peak_bytes, g.MemoryBytes() + idom.capacity() * 4 + retained.capacity() * 8 + ps.peak_bytes);
  clock.End("encode");
  return r;
}

DumpDiff DiffDumps(const std::vector<std::string>& paths, const DumpAnalysisOptions& options) {
  if (paths.size() != 2 && paths.size() != 3) throw std::invalid_argument("diff takes 2 or 3 dumps");
  DumpDiff d;
  ProgressLine progress(options.progress_fd);
  PhaseClock clock(&d.phases);
  std::vector<std::pair<uint64_t, uint32_t>> before, middle;
  {
    DumpReadStats rs;
    DumpHeap a = Read(paths[0], options, progress, &rs);
    before = Keys(a);
  }
  if (paths.size() == 3) {
    DumpReadStats rs;
    DumpHeap b = Read(paths[1], options, progress, &rs);
    middle = Keys(b);
  }
  DumpReadStats rs;
  DumpHeap last = Read(paths.back(), options, progress, &rs);
  clock.End("parse");
  d.has_sites = last.has_sites;
  d.has_generations = last.has_generations;

  // New objects of the last dump, by dump index.
  std::vector<bool> is_new(last.size());
  std::unordered_map<std::string, DumpTally> by_site;
  for (size_t i = 0; i < last.size(); i++) {
    uint32_t gen = last.has_generations ? last.generation[i] : DumpHeap::kNoGeneration;
    if (Contains(before, last.address[i], gen)) continue;
    if (paths.size() == 3 && !Contains(middle, last.address[i], gen)) continue;
    is_new[i] = true;
    d.new_objects++;
    d.new_bytes += last.memsize[i];
  }
  std::vector<std::pair<uint64_t, uint32_t>>().swap(before);
  std::vector<std::pair<uint64_t, uint32_t>>().swap(middle);
  // Objects without a site are grouped by class: the class record's name.
  std::unordered_map<uint64_t, uint32_t> class_records;  // class address -> name id in last.names
  {
    for (size_t i = 0; i < last.size(); i++)
      if ((last.type[i] == kDumpClass || last.type[i] == kDumpModule) && last.name[i])
        class_records.emplace(last.address[i], last.name[i]);
  }
  std::unordered_map<uint32_t, std::string> site_names;
  for (size_t i = 0; i < last.size(); i++) {
    if (!is_new[i]) continue;
    std::string key;
    if (last.has_sites && last.site[i]) {
      auto it = site_names.find(last.site[i]);
      if (it == site_names.end()) it = site_names.emplace(last.site[i], last.SiteName(last.site[i])).first;
      key = it->second;
    } else {
      auto it = last.klass[i] ? class_records.find(last.classes.Get(last.klass[i])) : class_records.end();
      key = it != class_records.end() ? std::string(last.names.Get(it->second))
                                      : std::string("(") + DumpTypeClassName(last.type[i]) + ")";
      if (last.has_sites) key = "(no site) " + key;
    }
    DumpTally& t = by_site[key];
    t.objects++;
    t.bytes += last.memsize[i];
  }
  std::vector<DumpTally> rows;
  for (auto& s : by_site) rows.push_back(DumpTally{s.first, s.second.objects, s.second.bytes});
  d.by_site = Top(std::move(rows), options.top);
  clock.End("match");

  // Dominator paths in the last dump: new objects grouped by the path of
  // their immediate dominator (the frames above the object itself).
  std::vector<uint64_t> new_addresses;
  for (size_t i = 0; i < last.size(); i++)
    if (is_new[i]) new_addresses.push_back(last.address[i]);
  std::sort(new_addresses.begin(), new_addresses.end());
  std::vector<bool>().swap(is_new);
  progress.Show("graph", 0);
  HeapGraph g = BuildDumpGraph(last, nullptr);
  last = DumpHeap{};
  MappedVector<uint32_t> idom = ComputeDominators(g);
  g.ReleaseEdges();
  std::unordered_map<uint32_t, std::string> path_of;  // idom node -> its path
  std::unordered_map<std::string, DumpTally> by_path;
  for (uint32_t v = g.first_object_node(); v < g.node_count(); v++) {
    if (!std::binary_search(new_addresses.begin(), new_addresses.end(), g.address(v))) continue;
    uint32_t holder = idom[v];
    auto it = path_of.find(holder);
    if (it == path_of.end()) {
      std::string key;
      std::vector<uint32_t> path = DominatorPath(idom, holder);  // leaf first
      for (auto pi = path.rbegin(); pi != path.rend(); ++pi) {
        uint32_t p = *pi;
        if (p == HeapGraph::kSuperRoot) continue;
        if (!key.empty()) key += " ⇢ ";
        key += FrameName(g, idom, p);
      }
      if (key.empty()) key = "(roots)";
      it = path_of.emplace(holder, std::move(key)).first;
    }
    DumpTally& t = by_path[it->second];
    t.objects++;
    t.bytes += g.self_size(v);
  }
  rows.clear();
  for (auto& s : by_path) rows.push_back(DumpTally{s.first, s.second.objects, s.second.bytes});
  d.by_path = Top(std::move(rows), options.top);
  clock.End("paths");
  return d;
}

}  // namespace fathom
