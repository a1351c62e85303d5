#include <algorithm>
#include <map>
#include <optional>

#include "cpu/cpu_profile.h"
#include "firefox/firefox_profile.h"
#include "encode/gzip.h"

namespace fathom {

namespace {
double Ms(int64_t ns) { return static_cast<double>(ns) / 1e6; }
}  // namespace

std::map<int32_t, firefox::Thread*> AddCpuTracks(firefox::Profile& profile, const CpuProfileData& data,
                                                 double offset_ms) {
  bool wall = data.mode == CpuMode::kWall;
  // Indexed by ThreadState.
  uint32_t categories[kThreadStateCount];
  categories[static_cast<int>(ThreadState::kRunning)] = profile.AddCategory({"Ruby (running)", "blue", {}});
  categories[static_cast<int>(ThreadState::kGvlWait)] = profile.AddCategory({"GVL wait", "red", {}});
  categories[static_cast<int>(ThreadState::kBlocked)] = profile.AddCategory({"Blocked / sleeping", "transparent", {}});
  categories[static_cast<int>(ThreadState::kGc)] = profile.AddCategory({"GC", "orange", {}});
  categories[static_cast<int>(ThreadState::kUnknown)] = profile.AddCategory({"Unknown", "darkgray", {}});
  // Visible: a thread burning a core in C without the GVL must not look idle.
  categories[static_cast<int>(ThreadState::kNoGvl)] = profile.AddCategory({"Running without GVL", "purple", {}});
  // C frames found by native unwinding (native: true) get their own
  // category whatever the state: a C extension often runs them with the
  // GVL released (zlib's deflate under rb_nogvl is "blocked"), and they
  // must still read as C code. The state stays visible in the ThreadState
  // markers, and the activity graph's height follows threadCPUDelta, so a
  // thread sleeping in a C wait stays flat.
  uint32_t native_category = profile.AddCategory({"Native (C)", "magenta", {}});
  firefox::MarkerSchema schema;
  schema.name = "ThreadState";
  schema.tooltip_label = "{marker.name} ({marker.data.samples} samples)";
  schema.table_label = "{marker.name}: {marker.data.state}";
  schema.chart_label = "{marker.name}";
  schema.fields = {{"state", "State", "string", true}, {"samples", "Samples", "integer", false}};
  schema.description =
      "A run of consecutive samples of this thread in one state, covering the time those samples stand for (from "
      "the thread's sample before the run to the run's last one). gvl-wait needs Ruby 3.2+; \"running without GVL\" "
      "is a thread on a CPU with the GVL released (C code under rb_nogvl).";
  profile.AddMarkerSchema(schema);

  // Samples per thread, in time order (the ring is drained in write order,
  // which is time order per thread).
  std::map<int32_t, std::vector<const CpuTimelineSample*>> by_thread;
  for (const CpuTimelineSample& s : data.timeline) by_thread[s.thread_id].push_back(&s);
  if (by_thread.empty()) by_thread[static_cast<int32_t>(data.pid)];  // the profiler needs one thread

  std::map<int32_t, firefox::Thread*> tracks;
  for (auto& [tid, samples] : by_thread) {
    auto name = data.thread_names.find(tid);
    std::string thread_name = name != data.thread_names.end() && !name->second.empty() ? name->second
                                                                                        : "thread " + std::to_string(tid);
    firefox::Thread& thread = profile.AddThread(thread_name, data.pid, tid, tid == data.pid, "ruby");
    tracks[tid] = &thread;
    thread.SetWeightType(firefox::WeightType::kTracingMs);
    std::stable_sort(samples.begin(), samples.end(),
                     [](const CpuTimelineSample* a, const CpuTimelineSample* b) { return a->time_ns < b->time_ns; });
    // A run of same-state samples becomes one marker (not for running).
    ThreadState run_state = ThreadState::kRunning;
    double run_start = 0, run_end = 0;
    int run_samples = 0;
    auto close_run = [&] {
      if (run_samples > 0 && run_state != ThreadState::kRunning) {
        std::string state = run_state == ThreadState::kNoGvl ? "running without GVL" : ThreadStateName(run_state);
        thread.AddIntervalMarker(state, run_start, std::max(run_start, run_end),
                                 categories[static_cast<int>(run_state)], "ThreadState",
                                 {firefox::MarkerDatum::String("state", state),
                                  firefox::MarkerDatum::Number("samples", run_samples)});
      }
      run_samples = 0;
    };
    // A sample is taken at the end of the time it stands for (the deltas
    // since the thread's previous sample), which is how the Firefox
    // Profiler reads threadCPUDelta, so each sample stays at its end. Its
    // stack, though, the viewer draws from its time to the next sample's:
    // after a long stretch (a wall sample covering a whole wait, taken when
    // the thread wanted the GVL back) that would paint the previous
    // sample's stack over the stretch, and this one's after it. So a
    // stretch longer than 1.5 intervals gets a weightless sample with this
    // sample's stack at its start; in CPU mode, where a sample's CPU time
    // may follow a long sleep, a weightless empty sample first marks the
    // time with no CPU. Runs of samples (the markers) cover the samples'
    // own stretches, from the first one's start to the last one's end,
    // never the gap before a late sample.
    double long_stretch = 1.5 * Ms(data.interval_ns > 0 ? data.interval_ns : 10000000);
    // The track begins when the sampler began watching the thread: its
    // first sample's wall delta runs from then (the thread's start, or the
    // profiler's). That is its registerTime, and a weightless empty sample
    // marks it. Without them (registerTime 0, the first sample an interval
    // or more in) the Firefox Profiler hatched the stretch before the first
    // sample with "This buffer was empty… increase your buffer size", which
    // tells the user the profile is broken; in CPU mode a thread blocked from
    // the start has its first sample at its end. A thread that started later
    // now shows the profiler's "not started yet" block before it instead.
    double previous_end = 0;
    if (!samples.empty()) {
      const CpuTimelineSample* first = samples.front();
      double watched_from = offset_ms + Ms(first->time_ns - first->wall_ns - data.start_monotonic_ns);
      previous_end = std::max(offset_ms, watched_from);
      thread.SetLifetime(previous_end);
      thread.AddSample(previous_end, std::nullopt, 0, 0);
    }
    for (const CpuTimelineSample* s : samples) {
      double end = offset_ms + Ms(s->time_ns - data.start_monotonic_ns);
      if (end < 0) end = 0;
      double span = Ms(wall ? s->wall_ns : std::min(s->wall_ns, s->cpu_ns));
      double t = std::max({0.0, previous_end, end - span});
      double idle_from = previous_end;
      previous_end = end;
      int state_index = static_cast<int>(s->state) < kThreadStateCount ? static_cast<int>(s->state)
                                                                       : static_cast<int>(ThreadState::kUnknown);
      uint32_t category = categories[state_index];
      std::optional<uint32_t> stack;
      if (s->stack_id < data.timeline_stacks.size()) {
        const CpuProfileData::TimelineStack& st = data.timeline_stacks[s->stack_id];
        for (size_t i = st.stack.size(); i-- > 0;) {  // root first
          const FrameSymbol& sym = data.symbols[st.stack[i].symbol];
          uint32_t func, frame;
          if (sym.native) {
            // isJS false, relevantForJS false: the call tree's "JavaScript
            // only" filter hides them, like Gecko's native frames.
            func = thread.InternFunc(sym.name, sym.filename, 0, false, false);
            frame = thread.InternFrame(func, 0, native_category);
          } else {
            bool ruby = !sym.filename.empty() && sym.filename != "<cfunc>";
            func = thread.InternFunc(sym.name, sym.filename, sym.first_line, ruby, !ruby);
            frame = thread.InternFrame(func, st.stack[i].line, category);
          }
          stack = thread.InternStack(stack, frame);
        }
      }
      if (!stack) {
        const char* label = s->state == ThreadState::kGc ? kCpuGcFrameName : kCpuNoStackFrameName;
        stack = thread.InternStack(std::nullopt, thread.InternFrame(thread.InternFunc(label, "", 0, false), 0, category));
      }
      // threadCPUDelta: the thread's own CPU clock since its previous sample
      // (both modes measure it).
      if (!wall && t - idle_from > long_stretch / 3 && s != samples.front())  // the first's is at registerTime
        thread.AddSample(idle_from, std::nullopt, 0, 0);
      if (end - t > long_stretch) thread.AddSample(t, stack, 0, 0);
      thread.AddSample(end, stack, Ms(wall ? s->wall_ns : s->cpu_ns), s->cpu_ns);
      if (run_samples > 0 && s->state == run_state) {
        run_end = end;
        run_samples++;
      } else {
        close_run();
        run_state = s->state;
        run_start = t;
        run_end = end;
        run_samples = 1;
      }
    }
    close_run();
  }
  return tracks;
}

std::string EncodeCpuFirefox(const CpuProfileData& data, bool gzip) {
  firefox::Profile profile(std::string("Fathom ") + CpuModeName(data.mode) + " profile (pid " +
                               std::to_string(data.pid) + ")",
                           Ms(data.start_realtime_ns), data.interval_ns > 0 ? Ms(data.interval_ns) : 10.0);
  profile.AddCategory({"Other", "grey", {}});
  AddCpuTracks(profile, data, 0);
  profile.SetProfilingRange(0, Ms(data.duration_ns));
  std::string json = profile.ToJson();
  return gzip ? GzipCompress(json) : json;
}

}  // namespace fathom
