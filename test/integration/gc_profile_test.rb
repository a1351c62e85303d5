# frozen_string_literal: true

require "test_helper"
require "support/pprof_raw"
require_relative "../fixtures/gc_churn"

# GC profiling end to end: the pprof read by go tool pprof, the report,
# options, and `fathom run`. (The figures against Ruby's own and the
# thread's clocks: gc_accuracy_test.rb.)
class GcProfileTest < Minitest::Test
  def setup
    require_native!
    @dir = Dir.mktmpdir("fathom-gc")
  end

  def teardown
    FileUtils.rm_rf(@dir)
  end

  # The accuracy of the figures, with each source, is
  # test/integration/gc_accuracy_test.rb's. These check what each source's
  # file holds and says about itself.
  def test_hooks_file_has_wall_cpu_steps_and_gcs
    raw, profile = profile_churn(:hooks)
    comments = Fathom::Pprof.read_file(@path).comments.to_a
    assert_equal %w[wall cpu gc_steps gcs], raw.sample_types
    assert_equal profile.stats[:steps], raw.total("gc_steps")
    assert_operator raw.total("gc_steps"), :>, 0
    assert_operator raw.total("wall"), :>=, raw.total("cpu")
    assert_includes comments, "fathom.gc.source=hooks"
    assert(comments.any? { |c| c.start_with?("fathom.gc.pauses count=") })
  end

  # The counters measure CPU time (GC.stat(:time)) and counts only: the
  # file says so with its sample types (cpu, the default, and gcs), and
  # has no wall or gc_steps column that would read as zero time or steps.
  def test_counters_file_has_cpu_and_gcs_only
    raw, profile = profile_churn(:counters)
    comments = Fathom::Pprof.read_file(@path).comments.to_a
    assert_equal %w[cpu gcs], raw.sample_types
    assert_match(%r{^cpu/nanoseconds\[dflt\] gcs/count$}, raw.output)
    assert_match(/^PeriodType: cpu nanoseconds$/, raw.output)
    top = TestHelper.go_pprof("-top", @path)
    assert_match(/^Type: cpu$/, top)
    assert_match(/Garbage Collection$/, top)
    assert_equal :counters, profile.stats[:source]
    assert_includes comments, "fathom.gc.source=counters poll_ns=10000000"
    refute(comments.any? { |c| c.start_with?("fathom.gc.pauses") })
  end

  def test_auto_source_follows_the_ruby_version
    expected = Gem::Version.new(RUBY_VERSION) >= Gem::Version.new("3.3") ? :hooks : :counters
    assert_equal expected, Fathom::GcProfiler.new.gc_source
    assert_equal expected, Fathom::GcProfiler.new(gc_source: "auto").gc_source
    assert_equal :hooks, Fathom::GcProfiler.new(coalesce: 0).gc_source, "only hooks see single steps"
    assert_equal expected, Fathom::GcProfiler.new.profile { GC.start }.stats[:source]
  end

  def test_counters_source_installs_no_thread_after_stop_and_survives_restart
    profiler = Fathom::GcProfiler.new(gc_source: :counters).start
    assert(Thread.list.any? { |t| t.name == "fathom-gc-poll" })
    2.times { GC.start }
    profiler.stop
    refute(Thread.list.any? { |t| t.name == "fathom-gc-poll" && t.alive? })
    GC.start # while stopped: not counted
    profiler.start
    GC.start
    profiler.stop
    summary = Fathom::Report::GcSummary.new(Fathom::Pprof.read(profiler.flush.bytes))
    assert_equal 3, summary.gc_count("major")
    assert_equal "counters", summary.source[:name]
  end

  # A short churn (5 GC.start), written to a file and read by go tool pprof.
  def profile_churn(gc_source)
    skip_unless_go!
    @path = File.join(@dir, "gc.pb.gz")
    profile = Fathom.profile(mode: :gc, gc_source: gc_source, out: @path) { GcChurn.run(full_gcs: 5) }
    raw = PprofRaw.read(@path)
    assert_operator raw.by_label("gcs", "gc type")["major"], :>=, 5, raw.output
    assert_equal({ "GC" => raw.total("cpu") }, raw.by_label("cpu", "thread"))
    assert_equal ["Garbage Collection"], raw.function_names
    [raw, profile]
  end

  def test_report_summarizes_counts_time_and_pauses
    profile = Fathom.profile(mode: :gc, gc_source: :hooks) { GcChurn.run(full_gcs: 5) }
    report = profile.report
    assert_match(/\AGC profile: \S+ of wall time, \d+ GCs \(\d+ minor, (\d+) major\)$/, report)
    assert_operator report[/(\d+) major\)/, 1].to_i, :>=, 5
    assert_match(/^time in GC\s+\S+ wall \(\S+%\), \S+ CPU, \d+ steps$/, report)
    assert_match(/^source\s+GC event hooks/, report)
    assert_match(/^pauses \(steps\)\s+p50 \S+\s+p90 \S+\s+p99 \S+\s+longest \S+$/, report)
    assert_match(/major\s+force\s+method$/, report)
    assert_equal :gc, profile.kind
  end

  def test_report_says_what_the_counters_source_cannot_show
    profile = Fathom.profile(mode: :gc, gc_source: :counters) { GcChurn.run(full_gcs: 5) }
    report = profile.report
    assert_match(/\AGC profile: \S+ of wall time, \d+ GCs \(\d+ minor, (\d+) major\)$/, report)
    assert_operator report[/(\d+) major\)/, 1].to_i, :>=, 5
    assert_match(/^time in GC\s+\S+ CPU \(\S+% of the wall time\), from GC.stat\(:time\)$/, report)
    assert_match(/^source\s+counters: Ruby's GC counters, read every 10ms \(no GC hooks\)\. Time in GC is the process CPU time$/,
                 report)
    assert_match(/wall time, pauses and steps need --gc-source hooks/, report)
    refute_match(/^pauses|steps +GCs|wall%/, report)
    assert_match(/^\s+cpu\s+cpu%\s+GCs\s+type\s+reason\s+cause$/, report)
    assert_match(/\A.*\n.*\n.*\n.*\n.*\n\nby type, reason and cause\n/, report, "sorted by cpu, the default: not said")
  end

  # One counter read that sees minors and then a major (GC.start): the
  # minors' cause is unknowable from the counters, and the report says so
  # instead of showing a row of "-" and "unknown".
  def test_counters_report_names_gcs_whose_cause_no_read_saw
    profile = Fathom.profile(mode: :gc, gc_source: :counters, coalesce: 5) do
      keep = []
      3.times do
        before = GC.count
        keep << Array.new(50) { "x" * 100 } until GC.count > before  # at least one minor
        GC.start
      end
    end
    report = profile.report
    # Their time is in the major's row: "-", not 0.
    assert_match(/^\s*-\s+-\s+\d+\s+minor\s+-\s+unseen$/, report)
    assert_match(/^unseen: GCs of the other type between two counter reads; Ruby keeps only the latest GC's reason and cause,$/, report)
    # The major's cause is GC.start ("method"); its reason is Ruby's, and a
    # pending oldmalloc/oldgen trigger outranks "force" in latest_gc_info, so
    # the reason column is not asserted (it depends on the heap's state).
    assert_match(/major\s+\S+\s+method$/, report)
  end

  def test_coalescing_keeps_periods_few_and_totals_equal
    coalesced = Fathom::GcProfiler.new(gc_source: :hooks)
    every = Fathom::GcProfiler.new(coalesce: 0)
    # Until a few GCs have run, not a fixed count: after the rest of the
    # suite the heap can have room for 400k strings without a single GC
    # (CI: 0 steps, 0 periods).
    churn = lambda do
      target = GC.count + 4
      400_000.times { "x" * 64 }
      "x" * 64 while GC.count < target
    end
    a = coalesced.profile { churn.call }
    b = every.profile { churn.call }
    assert_operator a.stats[:periods], :<, a.stats[:steps]
    assert_equal b.stats[:steps], b.stats[:periods], "coalesce: 0 makes a period per step"
    assert_equal 0, b.stats[:merged_on_overflow]
  end

  def test_bad_options_raise_clear_errors
    e = assert_raises(ArgumentError) { Fathom::GcProfiler.new(format: :svg) }
    assert_match(/fathom: format must be one of :pprof, :firefox/, e.message)
    e = assert_raises(ArgumentError) { Fathom::GcProfiler.new(coalsce: 1) }
    assert_match(/unknown option :coalsce/, e.message)
    e = assert_raises(TypeError) { Fathom::GcProfiler.new(coalesce: :soon) }
    assert_match(/fathom: coalesce must be/, e.message)
    e = assert_raises(ArgumentError) { Fathom::GcProfiler.new(gc_source: :polling) }
    assert_match(/fathom: gc_source must be one of :auto, :hooks, :counters, got :polling/, e.message)
    e = assert_raises(TypeError) { Fathom::GcProfiler.new(gc_source: 1) }
    assert_match(/fathom: gc_source must be a Symbol/, e.message)
    e = assert_raises(ArgumentError) { Fathom::GcProfiler.new(gc_source: :counters, coalesce: 0) }
    assert_match(/coalesce: 0 .* needs gc_source: :hooks/, e.message)
    e = assert_raises(ArgumentError) { Fathom.profile(mode: :gc, exact: true) { nil } }
    assert_match(/unknown option :exact for Fathom.profile\(mode: :gc\)/, e.message)
  end

  def test_only_one_gc_profiler_at_a_time
    a = Fathom::GcProfiler.new.start
    begin
      e = assert_raises(Fathom::Error) { Fathom::GcProfiler.new.start }
      assert_match(/another GC profiler is already running/, e.message)
    ensure
      a.stop
    end
  end

  def test_heap_and_gc_together_write_two_files
    profiles = Fathom.profile(mode: %i[heap gc], out: File.join(@dir, "run.pb.gz"), exact: true) do
      GcChurn.run(full_gcs: 2)
    end
    assert_equal %i[heap gc], profiles.keys
    assert File.exist?(File.join(@dir, "run.heap.pb.gz"))
    assert File.exist?(File.join(@dir, "run.gc.pb.gz"))
    assert_equal :heap, Fathom::Profile.load(File.join(@dir, "run.heap.pb.gz")).kind
    assert_equal :gc, Fathom::Profile.load(File.join(@dir, "run.gc.pb.gz")).kind
  end

  def test_fathom_run_mode_heap_gc
    skip_unless_go!
    script = File.expand_path("../fixtures/gc_churn.rb", __dir__)
    _o, err, status = TestHelper.run_fathom("run", "--mode", "heap,gc", "-o", File.join(@dir, "prof"), "--",
                                            RbConfig.ruby, script, env: TestHelper::PLAIN_ENV)
    assert status.success?, err
    assert_match(/fathom: wrote heap profile to #{Regexp.escape(File.join(@dir, "prof.heap.pb.gz"))}/, err)
    assert_match(/fathom: wrote gc profile to #{Regexp.escape(File.join(@dir, "prof.gc.pb.gz"))} \(\d+ GCs, (\d+ steps|from Ruby's GC counters)\)/, err)
    raw = PprofRaw.read(File.join(@dir, "prof.gc.pb.gz"))
    assert_operator raw.by_label("gcs", "gc type")["major"], :>=, 50

    report, err, status = TestHelper.run_fathom("report", File.join(@dir, "prof.gc.pb.gz"))
    assert status.success?, err
    assert_match(/GCs \(\d+ minor, \d+ major\)/, report)
  end

  def test_fathom_run_gc_source_option
    skip_unless_go!
    script = File.expand_path("../fixtures/gc_churn.rb", __dir__)
    %w[hooks counters].each do |source|
      out = File.join(@dir, "#{source}.pb.gz")
      _o, err, status = TestHelper.run_fathom("run", "--mode", "gc", "--gc-source", source, "-o", out, "--",
                                              RbConfig.ruby, script, env: TestHelper::PLAIN_ENV)
      assert status.success?, err
      assert_operator PprofRaw.read(out).by_label("gcs", "gc type")["major"], :>=, 50
      report, err, status = TestHelper.run_fathom("report", out)
      assert status.success?, err
      assert_match(source == "hooks" ? /^source\s+GC event hooks/ : /^source\s+counters: Ruby's GC counters/, report)
    end
    _o, err, status = TestHelper.run_fathom("run", "--mode", "gc", "--gc-source", "polling", "--", "true")
    assert_equal 2, status.exitstatus
    assert_match(/--gc-source must be one of auto, hooks, counters, got "polling"/, err)
  end
end

# The Firefox Profiler timeline: the file the profiler writes passes the
# structural check of the processed format (v48), and holds one GC marker
# per period with the GC counts of the run.
class GcFirefoxProfileTest < Minitest::Test
  def setup
    require_native!
    require "support/firefox_format"
    @dir = Dir.mktmpdir("fathom-gc-firefox")
  end

  def teardown
    FileUtils.rm_rf(@dir)
  end

  def load_json(path)
    bytes = File.binread(path)
    bytes = Zlib.gunzip(bytes) if bytes.start_with?("\x1f\x8b".b)
    JSON.parse(bytes)
  end

  def test_firefox_file_passes_the_structural_check_and_counts_gcs
    truth = nil
    path = File.join(@dir, "gc.json.gz")
    Fathom.profile(mode: :gc, gc_source: :hooks, format: :firefox, out: path) { truth = GcChurn.run(full_gcs: 10) }
    json = load_json(path)
    FirefoxFormat.check!(json)
    assert_equal 48, json.dig("meta", "preprocessedProfileVersion")
    gc = json["threads"].find { |t| t["name"] == "Garbage Collection" }
    refute_nil gc
    markers = gc["markers"]["data"].select { |d| d && d["type"] == "GC" }
    majors = markers.select { |m| m["gc_type"] == "major" }.sum { |m| m["gcs"] }
    assert_equal truth[:major], majors
    assert(markers.all? { |m| m["gc_ms"] >= 0 && m["steps"] >= 1 })
    names = gc["markers"]["name"].map { |i| gc["stringArray"][i] }.uniq.sort
    assert_includes names, "Major GC"
    assert_equal "tracing-ms", gc["samples"]["weightType"]

    report, err, status = TestHelper.run_fathom("report", path)
    assert status.success?, err
    assert_match(/GCs \(\d+ minor, #{truth[:major]} major\)/, report)
  end

  # One "GCPoll" marker per read that saw GCs, with what the counters tell:
  # counts by type and GC.stat(:time)'s CPU time; no wall time or steps,
  # no "unseen" cause. The track's samples carry that time once per read.
  def test_firefox_file_from_the_counters_source
    truth = nil
    path = File.join(@dir, "gc.json.gz")
    Fathom.profile(mode: :gc, gc_source: :counters, format: :firefox, out: path) { truth = GcChurn.run(full_gcs: 10) }
    json = load_json(path)
    FirefoxFormat.check!(json)
    gc = json["threads"].find { |t| t["name"] == "Garbage Collection" }
    data = gc["markers"]["data"]
    assert_equal ["GCPoll"], data.map { |d| d["type"] }.uniq
    assert_equal truth[:major], data.sum { |m| m["major_gcs"] }
    assert_equal truth[:minor], data.sum { |m| m["minor_gcs"] }
    assert(data.all? { |m| m["gcs"] == m["minor_gcs"] + m["major_gcs"] && m["gcs"] >= 1 })
    assert_in_delta truth[:time_ms], data.sum { |m| m["cpu_ms"] }, [truth[:time_ms] * 0.10, 2].max
    assert(data.none? { |m| m.key?("steps") || m.key?("gc_ms") || m["gc_cause"] == "unseen" }, data.inspect)
    names = gc["markers"]["name"].map { |i| gc["stringArray"][i] }.uniq
    assert_empty names - ["Minor GC", "Major GC", "Minor + major GCs"]
    weights = gc["samples"]["weight"]
    assert_in_delta data.sum { |m| m["cpu_ms"] }, weights.sum, 1e-6, "the CPU time once per read"
    # An Idle sample at the track's start (its registerTime), then a
    # weighted sample and an Idle one per read.
    assert_equal 1 + (2 * data.size), weights.size, "a weighted sample and an Idle one per read"
    schemas = json.dig("meta", "markerSchema").map { |s| s["name"] }
    assert_equal ["GCPoll"], schemas

    report, err, status = TestHelper.run_fathom("report", path)
    assert status.success?, err
    assert_match(/#{truth[:minor] + truth[:major]} GCs \(#{truth[:minor]} minor, #{truth[:major]} major\)/, report)
    assert_match(/^time in GC\s+\S+ CPU \(\S+% of the wall time\), from GC.stat\(:time\)/, report)
    refute_match(/\d steps|s wall/, report)
  end

  def test_plain_json_when_not_gzipped_and_cli_naming
    profile = Fathom::GcProfiler.new(format: :firefox).profile { GC.start }
    plain = Fathom::GcProfiler.new(format: :firefox).tap(&:start).tap(&:stop).flush(gzip: false)
    assert plain.bytes.start_with?("{")
    FirefoxFormat.check!(JSON.parse(plain.bytes))
    FirefoxFormat.check!(profile.firefox_json)
  end
end

class GcFlushWindowTest < Minitest::Test
  def setup
    require_native!
  end

  # Each flush covers the window since the previous one, so periodic files
  # (Fathom::PeriodicFlusher) do not repeat each other.
  def test_flushes_cover_consecutive_windows
    profiler = Fathom::GcProfiler.new.start
    3.times { GC.start }
    first = Fathom::Report::GcSummary.new(Fathom::Pprof.read(profiler.flush.bytes))
    2.times { GC.start }
    second = Fathom::Report::GcSummary.new(Fathom::Pprof.read(profiler.flush.bytes))
    profiler.stop
    assert_equal 3, first.gc_count("major")
    assert_equal 2, second.gc_count("major")
  end

  def test_periodic_flusher_writes_gc_profiles
    dir = Dir.mktmpdir("fathom-gc-flusher")
    profiler = Fathom::GcProfiler.new.start
    flusher = Fathom::PeriodicFlusher.new(profiler, dir: dir, interval: 0.05).start
    # Until the flusher has written a file of its own (the final one comes
    # from stop), not for a fixed 0.3 s: while this thread runs GC.start
    # back to back, the flusher thread gets the GVL back only at Ruby's
    # 100 ms timeslice, and one flush gives it up twice (encode, write). On
    # 3.3 that left 0.3 s with no periodic file at all. What is tested here
    # is that each file covers its own window, not the flusher's punctuality.
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 5
    GC.start while Dir[File.join(dir, "*.pb.gz")].empty? && Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
    GC.start
    flusher.stop
    profiler.stop
    files = Dir[File.join(dir, "*.pb.gz")]
    assert_operator files.size, :>=, 2
    majors = files.sum { |f| Fathom::Report::GcSummary.new(Fathom::Pprof.read_file(f)).gc_count("major") }
    assert_operator majors, :>, 0
  ensure
    FileUtils.rm_rf(dir)
  end
end
