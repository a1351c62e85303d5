#include "timeline/firefox_combined.h"

#include <algorithm>
#include <cstdlib>
#include <map>
#include <optional>
#include <stdexcept>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "firefox/firefox_profile.h"
#include "encode/gzip.h"
#include "gc/firefox_gc_track.h"

namespace fathom {

namespace {

double Ms(int64_t ns) { return static_cast<double>(ns) / 1e6; }

// The heap profiler's allocations on the tracks of the threads that made
// them (see the header for the matching).
void AddHeapAllocations(firefox::Profile& profile, const HeapProfileRows& heap, double offset_ms,
                        const std::map<int32_t, firefox::Thread*>& tracks, const CpuProfileData* cpu) {
  uint32_t category = profile.AddCategory({"Ruby allocation", "yellow", {}});
  firefox::Thread* main = nullptr;
  auto main_it = tracks.find(static_cast<int32_t>(heap.pid));
  if (main_it != tracks.end()) main = main_it->second;
  if (!main && !tracks.empty()) main = tracks.begin()->second;
  if (!main) main = &profile.AddThread("ruby", heap.pid, heap.pid, true, "ruby");

  std::unordered_map<std::string, firefox::Thread*> by_name;
  if (cpu) {
    for (const auto& [tid, thread] : tracks) {
      auto n = cpu->thread_names.find(tid);
      if (n != cpu->thread_names.end() && !n->second.empty()) by_name.emplace(n->second, thread);
    }
  }
  std::unordered_map<uint32_t, firefox::Thread*> label_track;  // thread label -> track
  auto track_of = [&](uint32_t label) {
    auto found = label_track.find(label);
    if (found != label_track.end()) return found->second;
    firefox::Thread* t = main;
    const std::string& name = label < heap.labels.size() ? heap.labels[label] : std::string();
    if (name != "main") {
      auto n = by_name.find(name);
      if (n != by_name.end()) {
        t = n->second;
      } else if (name.rfind("thread ", 0) == 0) {
        char* end = nullptr;
        long tid = std::strtol(name.c_str() + 7, &end, 10);
        auto it = end && *end == '\0' ? tracks.find(static_cast<int32_t>(tid)) : tracks.end();
        if (it != tracks.end()) t = it->second;
      }
    }
    label_track.emplace(label, t);
    return t;
  };

  // Stacks are interned per track (each thread has its own tables).
  std::map<std::pair<firefox::Thread*, uint32_t>, uint32_t> stack_ids;
  auto stack_of = [&](firefox::Thread* t, uint32_t stack) {
    auto key = std::make_pair(t, stack);
    auto found = stack_ids.find(key);
    if (found != stack_ids.end()) return found->second;
    std::optional<uint32_t> id;
    if (stack < heap.truncated.size() && heap.truncated[stack])
      id = t->InternStack(std::nullopt, t->InternFrame(t->InternFunc(kTruncatedFrameName, "", 0, false), 0, category));
    const auto& frames = heap.stacks[stack];
    for (size_t i = frames.size(); i-- > 0;) {  // root first
      const FrameSymbol& sym = heap.symbols[frames[i].symbol];
      bool ruby = !sym.filename.empty() && sym.filename != "<cfunc>";
      uint32_t func = t->InternFunc(sym.name, sym.filename, sym.first_line, ruby, !ruby);
      id = t->InternStack(id, t->InternFrame(func, frames[i].line, category));
    }
    if (!id) id = t->InternStack(std::nullopt, t->InternFrame(t->InternFunc("(no Ruby stack)", "", 0, false), 0, category));
    stack_ids.emplace(key, *id);
    return *id;
  };
  // The class of the allocated object as the stack's leaf frame: "new
  // String". The profiler keeps jsAllocations' className but shows it
  // nowhere (not in the call tree, the tooltips or the sidebar), so a frame
  // is the only place a user sees it: under each allocating function in the
  // "JS Allocations" call tree, and at the top of the inverted one, which
  // then reads as bytes by class. `fathom report` drops this leaf again
  // (report/firefox_tables.rb), so its top allocating functions stay the
  // Ruby functions.
  std::map<std::tuple<firefox::Thread*, uint32_t, uint32_t>, uint32_t> class_stack_ids;
  auto class_stack_of = [&](firefox::Thread* t, uint32_t stack, uint32_t class_label, const std::string& cls) {
    auto key = std::make_tuple(t, stack, class_label);
    auto found = class_stack_ids.find(key);
    if (found != class_stack_ids.end()) return found->second;
    uint32_t parent = stack_of(t, stack);
    uint32_t id = t->InternStack(parent, t->InternFrame(t->InternFunc(AllocatedClassFrameName(cls), "", 0, false), 0,
                                                       category));
    class_stack_ids.emplace(key, id);
    return id;
  };

  for (const HeapProfileRows::Allocation& a : heap.allocations) {
    firefox::Thread* t = track_of(a.thread_label);
    double time = std::max(0.0, offset_ms + Ms(a.time_ns - heap.start_monotonic_ns));
    const std::string& cls = a.class_label < heap.labels.size() ? heap.labels[a.class_label] : std::string("?");
    // typeName/coarseType are Gecko's JS object kinds; "Ruby"/"Object" say
    // what these are. inNursery: Ruby's generations are not known here.
    t->AddJsAllocation(time, cls, "Ruby", "Object", static_cast<double>(a.bytes), false,
                       class_stack_of(t, a.stack, a.class_label, cls));
  }
}

}  // namespace

std::string EncodeCombinedFirefox(const CpuProfileData* cpu, const GcProfileData* gc, const HeapProfileRows* heap,
                                  bool gzip) {
  if (!cpu && !gc && !heap) throw std::invalid_argument("firefox profile: nothing to encode");
  // The earliest start is the profile's; each part is offset from it.
  int64_t base_mono = INT64_MAX, base_real = 0, end_mono = INT64_MIN;
  int64_t pid = 0;
  auto consider = [&](int64_t mono, int64_t real, int64_t end) {
    if (mono < base_mono) {
      base_mono = mono;
      base_real = real;
    }
    end_mono = std::max(end_mono, end);
  };
  if (cpu) {
    consider(cpu->start_monotonic_ns, cpu->start_realtime_ns, cpu->start_monotonic_ns + cpu->duration_ns);
    pid = cpu->pid;
  }
  if (gc) {
    consider(gc->start_monotonic_ns, gc->start_realtime_ns, gc->end_monotonic_ns);
    pid = gc->pid;
  }
  if (heap) {
    consider(heap->start_monotonic_ns, heap->time_nanos, heap->start_monotonic_ns + heap->duration_nanos);
    pid = heap->pid;
  }
  double interval_ms = cpu && cpu->interval_ns > 0 ? Ms(cpu->interval_ns) : 10.0;
  std::string what;
  if (cpu) what += CpuModeName(cpu->mode);
  if (gc) what += what.empty() ? "gc" : "+gc";
  if (heap) what += what.empty() ? "heap" : "+heap";
  firefox::Profile profile("Fathom " + what + " profile (pid " + std::to_string(pid) + ")", Ms(base_real),
                           interval_ms);
  profile.AddCategory({"Other", "grey", {}});
  std::map<int32_t, firefox::Thread*> tracks;
  if (cpu) tracks = AddCpuTracks(profile, *cpu, Ms(cpu->start_monotonic_ns - base_mono));
  if (heap) AddHeapAllocations(profile, *heap, Ms(heap->start_monotonic_ns - base_mono), tracks, cpu);
  if (gc) AddGcTrack(profile, *gc, Ms(gc->start_monotonic_ns - base_mono), /*beside_thread_tracks=*/cpu != nullptr);
  // The main thread's track is what the profiler shows first.
  if (cpu && !tracks.empty()) {
    size_t index = 0;
    for (const auto& [tid, t] : tracks) {
      if (tid == static_cast<int32_t>(cpu->pid)) {
        profile.SetSelectedThread(index);
        break;
      }
      index++;
    }
  }
  profile.SetProfilingRange(0, Ms(end_mono - base_mono));
  std::string json = profile.ToJson();
  return gzip ? GzipCompress(json) : json;
}

}  // namespace fathom
