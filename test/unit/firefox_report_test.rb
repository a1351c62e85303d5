# frozen_string_literal: true

require "test_helper"
require "json"

# `fathom report` on a combined cpu+gc+heap Firefox file, made by hand here
# (no native extension): the top functions of the samples and the top
# allocating functions (the `pprof -top` table, Top), the threads table with
# a total, and GC counted once: the "Garbage Collection" track is a view of
# the GC time the threads' GC-category samples already hold.
class FirefoxReportTest < Minitest::Test
  CATEGORIES = [["Other", "grey"], ["Ruby (running)", "blue"], ["GC", "orange"], ["Ruby allocation", "yellow"],
                ["Idle", "transparent"]].map { |n, c| { "name" => n, "color" => c, "subcategories" => ["Other"] } }

  # A track: funcs by name; stacks as [frame names root first, category];
  # samples as [stack index or nil, weight ms, threadCPUDelta ns].
  def track(name, tid, stacks, samples, allocations: nil, markers: [])
    funcs = stacks.flat_map(&:first).uniq
    strings = funcs.dup
    table = { "frame" => [], "category" => [], "subcategory" => [], "prefix" => [] }
    index = {}
    stacks.each do |names, cat|
      prefix = nil
      names.each_with_index do |n, depth|
        key = names[0..depth]
        unless index.key?(key)
          index[key] = table["frame"].size
          table["frame"] << funcs.index(n) # one frame per func
          table["category"] << cat
          table["subcategory"] << 0
          table["prefix"] << prefix
        end
        prefix = index[key]
      end
    end
    table["length"] = table["frame"].size
    stack_of = ->(i) { i && index[stacks[i][0]] }
    t = {
      "name" => name, "tid" => tid, "pid" => "1", "stringArray" => strings,
      "stackTable" => table,
      "frameTable" => { "func" => funcs.each_index.to_a, "length" => funcs.size },
      "funcTable" => { "name" => funcs.each_index.to_a, "length" => funcs.size },
      "samples" => { "stack" => samples.map { |s| stack_of.call(s[0]) }, "time" => samples.each_index.map { |i| i * 10.0 },
                     "weight" => samples.map { |s| s[1] }, "weightType" => "tracing-ms", "length" => samples.size },
      "markers" => { "data" => markers, "length" => markers.size },
    }
    t["samples"]["threadCPUDelta"] = samples.map { |s| s[2] } if samples.any? { |s| s[2] }
    if allocations
      t["jsAllocations"] = {
        "stack" => allocations.map { |a| stack_of.call(a[0]) }, "weight" => allocations.map { |a| a[1] },
        "className" => allocations.map { |a| a[2] }, "weightType" => "bytes", "length" => allocations.size
      }
    end
    t
  end

  # main: 30 ms in Object#work (10 under Object#helper), 5 ms of GC, and a
  # weightless filler row; worker: 20 ms in Object#work. The GC track's
  # period says 7 ms (its own measure of the same GC); weighted: as files
  # written before GC was counted once.
  def profile(gc_weight: 0)
    main = track("main", 100,
                 [[%w[<main> Object#work], 1], [%w[<main> Object#work Object#helper], 1], [["Garbage Collection"], 2]],
                 [[0, 0, 0], [0, 20.0, 20_000_000], [1, 10.0, 10_000_000], [2, 5.0, 5_000_000]],
                 allocations: [[1, 4000, "String"], [0, 1000, "Array"], [1, 3000, "String"]])
    worker = track("worker", 101, [[%w[<main> Object#work], 1]], [[0, 20.0, 20_000_000]])
    gc = track("Garbage Collection", 0, [[["Garbage Collection"], 2], [["Idle"], 4]], [[0, gc_weight, nil], [1, 0, nil]],
               markers: [{ "type" => "GC", "gc_type" => "minor", "gc_ms" => 7.0, "cpu_ms" => 6.0, "gcs" => 1, "steps" => 1 }])
    { "meta" => { "product" => "Fathom cpu+gc+heap profile (pid 1)", "categories" => CATEGORIES,
                  "profilingStartTime" => 0, "profilingEndTime" => 100.0 },
      "threads" => [main, worker, gc] }
  end

  def report(json, **opts)
    Fathom::Report.for_bytes(JSON.generate(json), **opts).to_s
  end

  def table_rows(text, type)
    section = text[/^Type: #{type}\n.*?(?=\n\n|\z)/m] or flunk("no #{type} table:\n#{text}")
    section.lines.grep(/\A\s*[\d.]+\S*\s+\d/).to_h { |l| [l.split.last, l.split.values_at(0, 3)] }
  end

  def test_top_functions_of_the_samples_and_of_the_allocations
    text = report(profile)
    assert_match(/\Acpu\+gc\+heap profile \(Firefox Profiler JSON/, text)
    assert_match(/^Top functions by cpu: threadCPUDelta .*, 4 samples$/, text)
    cpu = table_rows(text, "cpu")
    assert_equal %w[40ms 50ms], cpu["Object#work"]
    assert_equal %w[10ms 10ms], cpu["Object#helper"]
    assert_equal %w[0 50ms], cpu["<main>"]
    # The thread's own GC samples only: the GC track's frame is not added.
    assert_equal %w[5ms 5ms], cpu["Collection"]
    assert_match(/of 55ms total/, text)

    assert_match(/^Top allocating functions: 3 sampled allocations/, text)
    allocs = table_rows(text, "alloc_space")
    assert_equal %w[7000B 7000B], allocs["Object#helper"]
    assert_equal %w[1000B 8000B], allocs["Object#work"]
    assert_match(/^By class \(alloc_space\):\n.*7000B\s+87\.50%\s+String$/m, text)

    # top and sample_index reach the functions table.
    assert_match(/Showing top 1 nodes out of 4/, report(profile, top: 1))
    assert_match(/^Type: samples$/, report(profile, sample_index: "samples"))
    assert_raises(ArgumentError) { report(profile, sample_index: "nope") }
  end

  # GC counted once. The threads' GC column (samples taken while GC stopped
  # them) goes into the total; the GC track's row comes after it, with its
  # own measure from the markers, and is left out, whether its samples
  # weigh nothing (written now) or weigh its GC time (older files).
  def test_the_gc_track_is_a_view_not_added_to_the_total
    [0, 7.0].each do |gc_weight|
      text = report(profile(gc_weight: gc_weight))
      # thread, samples, Ruby (running), GC, heap samples, heap bytes, markers
      assert_match(/^  main\s+3\s+30ms\s+5ms\s+3\s+7\.81kB\s+0$/, text)
      assert_match(/^  worker\s+1\s+20ms\s+0\s+0\s+0\s+0$/, text)
      # The total: the threads only (the filler row is not a sample).
      assert_match(/^  total \(2 tracks\)\s+4\s+50ms\s+5ms\s+3\s+7\.81kB\s+0$/, text)
      # Then the GC track with its markers' 7 ms, after the total (its
      # samples: 0 weighed, 1 in an older file).
      assert_match(/^  total .*\n  Garbage Collection \(view\)\s+\d\s+0\s+7ms\s+0\s+0\s+1$/, text)
      assert_match(/a view of the same time, not in the total/, text)
      refute_match(/\bIdle\b/, text)
      assert_match(/^  time in GC\s+7ms wall/, text)
    end
  end

  # Wall time in GC well above CPU time in GC: the summary says how much the
  # thread spent off the CPU (gc_off_cpu.rb), as the pprof report does.
  def test_a_gc_track_with_wall_well_above_cpu_says_so
    json = profile
    json["threads"].last["markers"]["data"] = [{ "type" => "GC", "gc_type" => "major", "gc_ms" => 7.0, "cpu_ms" => 2.0,
                                                 "gcs" => 1, "steps" => 1 }]
    assert_match(/^  off the CPU\s+5ms of the wall time in GC \(71.43%\): the thread waited for a CPU/, report(json))
    refute_match(/off the CPU/, report(profile))
  end

  # From the counters source the GC track's markers are "GCPoll" ones, whose
  # only time is GC.stat(:time)'s CPU time: the row and the note say so.
  def test_a_counters_gc_track_is_read_as_cpu_time
    json = profile(gc_weight: 6.0)
    gc = json["threads"].last
    gc["markers"]["data"] = [{ "type" => "GCPoll", "gcs" => 3, "minor_gcs" => 2, "major_gcs" => 1, "cpu_ms" => 6.0,
                               "latest" => "major" }]
    text = report(json)
    assert_match(/^  Garbage Collection \(view\)\s+1\s+0\s+6ms\s+0\s+0\s+1$/, text)
    assert_match(/\(CPU time in GC, from GC.stat\(:time\)\); a view of the same time, not in the total/, text)
    assert_match(/^  100ms of wall time, 3 GCs \(2 minor, 1 major\), 1 read of Ruby's GC counters that saw GCs$/, text)
    assert_match(/^  time in GC\s+6ms CPU .*from GC.stat\(:time\)/, text)
  end

  def test_wall_mode_weighs_by_wall_time
    json = profile
    json["meta"]["product"] = "Fathom wall+gc profile (pid 1)"
    json["threads"][1]["samples"]["threadCPUDelta"] = [1_000_000]
    text = report(json)
    assert_match(/^Top functions by wall: sample weights \(wall time/, text)
    assert_equal %w[40ms 50ms], table_rows(text, "wall")["Object#work"]
    assert_match(/^Type: cpu$/, report(json, sample_index: "cpu"))
  end

  def test_a_broken_stack_table_is_bad_data
    json = profile
    json["threads"][0]["stackTable"]["prefix"][0] = 5 # not an earlier stack
    assert_raises(Fathom::Error) { report(json) }
    json = profile
    json["threads"][0]["samples"]["stack"][1] = 99
    e = assert_raises(Fathom::Error) { report(json) }
    assert_match(/out of range/, e.message)
    json = profile
    json["threads"][0]["samples"]["threadCPUDelta"][1] = "x"
    assert_raises(Fathom::Error) { report(json) }
  end
end
