# frozen_string_literal: true

require "test_helper"
require "json"
require "zlib"

# `fathom run --mode cpu,gc,heap --format firefox` end to end: a real
# threaded program (examples/threaded_app.rb) in its own process, the one
# file it writes read back: the v48 structural check, a track per thread,
# the GC track with its markers, allocations on the threads that made them
# with stacks naming the allocating method, threadCPUDelta summing to each
# thread's own CPU clock, and (--native) C frames from libz.
class FirefoxCombinedTest < Minitest::Test
  APP = File.join(TestHelper::ROOT, "examples/threaded_app.rb")

  def setup
    require_native!
    require "support/firefox_format"
    @dir = Dir.mktmpdir("fathom-ffx")
  end

  def teardown
    FileUtils.rm_rf(@dir)
  end

  def run_app(*fathom_args, seconds: 1.0)
    out = File.join(@dir, "app.json.gz")
    truth = File.join(@dir, "truth.json")
    env = TestHelper::PLAIN_ENV.merge("THREADED_APP_TRUTH" => truth, "THREADED_APP_SECONDS" => seconds.to_s)
    _o, err, status = Open3.capture3(env, RbConfig.ruby, "-I#{TestHelper::LIB}", TestHelper::EXE, "run", *fathom_args,
                                     "-o", out, "--", RbConfig.ruby, APP)
    assert status.success?, "fathom run failed: #{err}"
    [out, JSON.parse(Zlib.gunzip(File.binread(out))), JSON.parse(File.read(truth)), err]
  end

  def track(json, name)
    json["threads"].find { |t| t["name"] == name } or flunk("no track #{name}: #{json["threads"].map { |t| t["name"] }}")
  end

  def test_one_file_holds_cpu_tracks_gc_markers_and_allocations
    path, json, truth, err = run_app("--mode", "cpu,gc,heap", "--format", "firefox", "--native")
    assert_equal [File.basename(path)], Dir.children(@dir) - ["truth.json"], "one file, not one per mode"
    assert_match(/wrote cpu\+gc\+heap profile to #{Regexp.escape(path)}/, err)
    FirefoxFormat.check!(json)
    assert_equal "ns", json["meta"]["sampleUnits"]["threadCPUDelta"]

    # GC track with markers.
    gc = track(json, "Garbage Collection")
    gc_markers = gc["markers"]["name"].map { |i| gc["stringArray"][i] }
    assert gc_markers.any? { |n| n.end_with?("GC") }, "GC markers: #{gc_markers.uniq}"
    # The track's samples carry GC time (an empty call tree there reads as
    # "no GC"); its schema says the threads' tracks hold the same time.
    assert gc["samples"]["weight"].any?(&:positive?), "GC track weights: #{gc["samples"]["weight"].uniq}"
    # gc_source :auto: the hooks' "GC" markers on 3.3+, the counters'
    # "GCPoll" ones (CPU time only) before.
    schema, time = Fathom::GcProfiler.auto_source(1) == :hooks ? %w[GC gc_ms] : %w[GCPoll cpu_ms]
    assert gc["markers"]["data"].any? { |d| d["type"] == schema && d[time].to_f >= 0 }
    gc_schema = json["meta"]["markerSchema"].find { |s| s["name"] == schema }
    description = gc_schema["data"].find { |d| d["label"] == "Description" }
    assert_match(/merged with them it counts twice/, description && description["value"])

    %w[web-1 web-2 compressor].each do |name|
      t = track(json, name)
      assert_equal truth[name]["tid"], t["tid"]
      # threadCPUDelta sums to the thread's own CPU clock (the last
      # interval before the thread ends is not sampled: a few ticks).
      # Not a count: a sum of measured clock deltas, short by at most the
      # unsampled tail (<= 12.5 ms + a kernel tick); measured within 4%.
      cpu = t["samples"]["threadCPUDelta"].compact.sum / 1e9
      assert_in_delta truth[name]["cpu"], cpu, [0.15 * truth[name]["cpu"], 0.05].max,
                      "#{name}: threadCPUDelta #{cpu.round(3)}s vs its CPU clock #{truth[name]["cpu"].round(3)}s"
    end

    # Allocations on the web threads that made them, with their stacks.
    # Heap ticks follow the GVL holder's CPU: each web thread runs >= 0.2 s
    # of Ruby (0.22-0.59 s measured), >= 20 ticks at 10 ms; each burst keeps
    # Bin(64, ~1/4). Measured 364-891 kept per thread (35 runs). With the
    # bursts Poisson(20): P(<= 10 kept) = sum P(N) P(Bin(64N, 1/4) <= 10)
    # = 4e-9. Over 90% of kept samples are Strings, under render and all
    # under serve: P(none of >= 11 is) < 0.1^11.
    %w[web-1 web-2].each do |name|
      t = track(json, name)
      allocs = t["jsAllocations"] or flunk("#{name} has no jsAllocations")
      assert_operator allocs["length"], :>, 10
      assert allocs["weight"].all? { |w| w >= 0 }
      assert_includes allocs["className"], "String"
      stacks = allocs["stack"].compact.map { |s| FirefoxFormat.stack_names(t, s) }
      assert stacks.any? { |names| names.include?("PageRenderer#render") }, "#{name}: no allocation under PageRenderer#render"
      assert stacks.any? { |names| names.include?("Object#serve") }
    end
    # The sleeper burns no CPU (no track in CPU mode) and allocates nothing.
    refute json["threads"].any? { |t| t["name"] == "sleeper" && t.key?("jsAllocations") }

    # C frames from libz under the compressor's Zlib::Deflate.deflate, not JS.
    # The compressor gets >= 18 CPU samples (18-60 measured), ~82% of them
    # in libz's deflate: P(no libz frame) <= 0.2^18 < 1e-12.
    comp = track(json, "compressor")
    natives = comp["frameTable"]["category"].each_index.select do |f|
      json["meta"]["categories"][comp["frameTable"]["category"][f]]["name"] == "Native (C)"
    end
    names = natives.map { |f| FirefoxFormat.func_name(comp, f) }
    assert names.any? { |n| n.match?(/deflate|adler32|crc32|longest_match/) }, "native frames: #{names.uniq.first(20)}"
    natives.each { |f| refute comp["funcTable"]["isJS"][comp["frameTable"]["func"][f]] }

    loaded = Fathom::Profile.load(path)
    assert_equal :cpu, loaded.kind
    # The terminal report: the heap samples each track holds, and no column
    # of a category no track has time in.
    report = loaded.report
    assert_match(/\Acpu\+gc\+heap profile/, report)
    web1 = report.lines.find { |l| l.split.first == "web-1" } or flunk(report)
    assert_includes web1.split, track(json, "web-1")["jsAllocations"]["length"].to_s, report
    refute_match(/Idle/, report)
    # The top functions of the samples (by threadCPUDelta) and of the
    # allocations, as for a pprof CPU profile and a heap one.
    assert_match(/^Top functions by cpu: threadCPUDelta/, report)
    assert_match(/^Type: cpu\n/, report)
    # Allocations by site: the allocating method and its line.
    assert_match(/^Type: alloc_space\n.*PageRenderer#render \S+:\d+$/m, report)
    # The total adds the threads; the GC track comes after it, as a view.
    assert_match(/^  total \(\d+ tracks\)\s+\d+.*\n  Garbage Collection \(view\)\s+\d+\s/, report)
    # What fathom run printed is what the file and the report hold: the
    # threads with CPU samples and their samples (weightless rows that mark
    # where a long stretch began are not samples).
    printed = err[/cpu: (\d+) cpu samples of (\d+) threads/] && [Regexp.last_match(1).to_i, Regexp.last_match(2).to_i]
    assert printed, err
    cpu_rows = report.lines.map(&:split).select { |cols| %w[main web-1 web-2 compressor sleeper].include?(cols.first) }
    assert_equal printed[1], cpu_rows.size, "threads printed vs in the report:\n#{err}\n#{report}"
    assert_equal printed[0], cpu_rows.sum { |cols| cols[1].to_i }, "samples printed vs in the report:\n#{err}\n#{report}"
  end

  def test_single_mode_and_pprof_keep_their_own_files
    out = File.join(@dir, "run")
    env = TestHelper::PLAIN_ENV.merge("THREADED_APP_SECONDS" => "0.2")
    _o, err, status = Open3.capture3(env, RbConfig.ruby, "-I#{TestHelper::LIB}", TestHelper::EXE, "run", "--mode", "cpu,gc",
                                     "-o", out, "--", RbConfig.ruby, APP)
    assert status.success?, err
    assert_equal %w[run.cpu.pb.gz run.gc.pb.gz], Dir.children(@dir).sort
  end

  def test_ruby_api_returns_one_profile_for_the_combined_modes
    path = File.join(@dir, "api.json.gz")
    profiles = Fathom.profile(mode: %i[wall gc heap retention], format: :firefox, out: path) do |profilers|
      # 0.3 s, and on until the heap sampler has taken 4 bursts (10 s at
      # most): on 3.1, 0.3 s alone gave a single burst in 2 of 60 runs.
      heap = profilers[:heap]
      now = -> { Process.clock_gettime(Process::CLOCK_MONOTONIC) }
      deadline = now.call + 0.3
      cap = now.call + 10
      Array.new(2) do |i|
        Thread.new do
          Thread.current.name = "t#{i}"
          loop do
            Array.new(1000) { |j| "x#{j}" }
            t = now.call
            break if t >= cap || (t >= deadline && heap.stats[:bursts] >= 4)
          end
        end
      end.each(&:join)
    end
    assert_same profiles[:wall], profiles[:gc]
    assert_same profiles[:wall], profiles[:heap]
    assert_equal :pprof, profiles[:retention].format
    assert_equal %w[api.json.gz api.retention.pb.gz], Dir.children(@dir).sort
    json = profiles[:wall].firefox_json
    FirefoxFormat.check!(json)
    t0 = track(json, "t0")
    # Ticks go to whichever thread holds the GVL; one of the two may get
    # none (on 3.1 one thread took every burst in 57 of 60 runs), so count
    # both. Of the >= 4 bursts, >= 3 came while only t0 and t1 allocated
    # (the first may be the main thread's, at start), each keeping each of
    # its 64 candidates with p ~ 1/4: P(none kept) <= (3/4)^192 < e^-55.
    allocations = %w[t0 t1].sum { |name| track(json, name).dig("jsAllocations", "length").to_i }
    assert_operator allocations, :>, 0
    assert_equal 1, json["threads"].count { |t| t["name"] == "Garbage Collection" }
    # Wall mode carries CPU deltas too: t0's wall timer fires every ~10 ms
    # of its >= 0.3 s (18-31 samples measured), by the clock, not by luck.
    assert t0["samples"]["threadCPUDelta"].compact.any?
  end
end
