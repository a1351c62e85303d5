# frozen_string_literal: true

require "test_helper"
require "support/pprof_raw"

# Paths that exist only on some Rubies, run on the Ruby the suite runs on
# (script/test runs it on 3.1 and 3.3): the sampling timer's mechanism, YJIT,
# and M:N threads. docs/internals/versions.md, "Ruby versions", cites these tests.
class RubyVersionsTest < Minitest::Test
  THREADED = File.expand_path("../fixtures/threaded_script.rb", __dir__)
  LEAK = File.expand_path("../fixtures/leak_script.rb", __dir__)
  RUBY34_CHANGES = File.expand_path("../fixtures/ruby34_changes.rb", __dir__)
  RUBY_33 = Gem::Version.new(RUBY_VERSION) >= Gem::Version.new("3.3")

  def setup
    require_native!
    skip_unless_go!
    @dir = Dir.mktmpdir("fathom-rubies")
  end

  def teardown
    FileUtils.rm_rf(@dir)
  end

  # 3.2+ (GVL events): SIGPROF to the thread that last took the GVL, whose
  # handler triggers the job on its own context (gvl_owner.h says why the
  # 3.3 timer thread no longer triggers it itself). 3.1: SIGPROF round-robin
  # until the GVL holder is found.
  def test_timer_mechanism_matches_this_ruby
    profiler = Fathom::HeapProfiler.new(interval: "1ms").start
    kept = []
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 0.3
    kept << "x" * 20 while Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
    stats = profiler.stats
    profiler.stop
    assert_operator stats[:samples_taken], :>, 20
    assert_equal RUBY_33 ? "gvl-owner" : "signal", stats[:timer_mechanism]
    assert_operator stats[:timer_signals], :>, 0
    assert_operator kept.size, :>, 0
  end

  # SIGPROF owned by someone else (another profiler): 3.3 falls back to
  # triggering the job from the timer thread, which needs no signal; 3.1
  # cannot and refuses with a clear error. In a child: the handler, once
  # ours, stays for the process's life.
  def test_sigprof_taken_by_another_profiler
    script = <<~RUBY
      require "fathom"
      trap("PROF") {}
      begin
        profiler = Fathom::HeapProfiler.new(interval: "1ms").start
        kept = []
        t = Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID) + 0.2
        kept << "x" * 20 while Process.clock_gettime(Process::CLOCK_THREAD_CPUTIME_ID) < t
        s = profiler.stats
        profiler.stop
        puts [s[:timer_mechanism], s[:timer_signals], s[:samples_taken]].join(" ")
      rescue Fathom::Error => e
        puts "refused: \#{e.message}"
      end
    RUBY
    out, err, status = Open3.capture3(TestHelper::PLAIN_ENV, RbConfig.ruby, "-I", TestHelper::LIB, "-e", script)
    assert status.success?, err
    if RUBY_33
      mechanism, signals, samples = out.split
      assert_equal "trigger", mechanism, out
      assert_equal 0, signals.to_i
      assert_operator samples.to_i, :>, 0
    else
      assert_match(/refused: .*SIGPROF already has a handler/, out)
    end
  end

  def test_heap_gc_and_retention_under_yjit
    yjit = `#{RbConfig.ruby} --yjit -e 'print defined?(RubyVM::YJIT) && RubyVM::YJIT.enabled?' 2>&1`
    skip "this Ruby has no YJIT" unless yjit == "true"

    out = File.join(@dir, "yjit")
    _o, err, status = TestHelper.run_fathom("run", "--mode", "heap,gc,retention", "--interval", "1ms", "-o", out,
                                            "--", RbConfig.ruby, "--yjit", THREADED,
                                            env: TestHelper::PLAIN_ENV.merge("FIXTURE_REQUIRE_YJIT" => "1"))
    assert status.success?, err
    assert_profiles_show_the_workers(out)
  end

  def test_heap_gc_and_retention_with_mn_threads
    skip "RUBY_MN_THREADS exists from Ruby 3.3" unless RUBY_33

    out = File.join(@dir, "mn")
    _o, err, status = TestHelper.run_fathom("run", "--mode", "heap,gc,retention", "--interval", "1ms", "-o", out,
                                            "--", RbConfig.ruby, THREADED,
                                            env: TestHelper::PLAIN_ENV.merge("RUBY_MN_THREADS" => "1"))
    assert status.success?, err
    assert_profiles_show_the_workers(out)
  end

  # M:N threads move Ruby threads between shared native threads, which the
  # CPU/wall profiler's per-thread timers cannot follow (before this
  # refusal: 14 samples for ~450 ms of four workers' CPU). It refuses with
  # the reason; `fathom run` runs the program unprofiled and says why; "0"
  # is off, as in Ruby's own reading (atoi > 0).
  def test_cpu_and_wall_refuse_mn_threads
    skip "RUBY_MN_THREADS exists from Ruby 3.3" unless RUBY_33

    script = <<~RUBY
      require "fathom"
      %i[cpu wall].each do |mode|
        Fathom::CpuProfiler.new(mode: mode).start.stop
        puts "\#{mode} started"
      rescue Fathom::Error => e
        puts "\#{mode} refused: \#{e.message}"
      end
    RUBY
    { "1" => "refused", "0" => "started" }.each do |value, outcome|
      out, err, status = Open3.capture3(TestHelper::PLAIN_ENV.merge("RUBY_MN_THREADS" => value), RbConfig.ruby,
                                        "-I", TestHelper::LIB, "-e", script)
      assert status.success?, err
      assert_equal %w[cpu wall], out.lines.map { |l| l.split.first }, out
      out.lines.each { |line| assert_includes line, outcome, "RUBY_MN_THREADS=#{value}: #{line}" }
      out.lines.each { |line| assert_match(/M:N threads are on \(RUBY_MN_THREADS\).*heap, GC and retention/, line) } if value == "1"
    end

    out, err, status = TestHelper.run_fathom("run", "--mode", "cpu", "-o", File.join(@dir, "mn-cpu"), "--",
                                             RbConfig.ruby, "-e", "puts :ran",
                                             env: TestHelper::PLAIN_ENV.merge("RUBY_MN_THREADS" => "1"))
    assert status.success?, err
    assert_equal "ran\n", out
    assert_match(/runs unprofiled.*M:N threads are on/, err)
  end

  # What Ruby 3.4 changed in the language, on every Ruby (the same program;
  # ruby34_changes.rb says what it does): Fathom mutates none of the
  # strings it is handed (3.4's chilled literals warn under
  # -W:deprecated); an `it` block is named as any block, by its method
  # (docs/limits.md); and a call that spans lines is charged to the line
  # Ruby itself records for the allocation (ObjectSpace.allocation_sourceline;
  # 3.4 compiles with Prism). Deterministic: exact mode.
  def test_ruby_34_language_changes
    out, err, status = Open3.capture3(TestHelper::PLAIN_ENV, RbConfig.ruby, "-W:deprecated", "-I", TestHelper::LIB,
                                      RUBY34_CHANGES, @dir)
    assert status.success?, err
    assert_empty err.lines.grep(/warning/i), err
    truth = JSON.parse(out.lines.last)
    heap = Fathom::Pprof.read_file(File.join(@dir, "heap.pb.gz"))
    alloc = heap.sample_type_index("alloc_objects")
    by_frame = Hash.new(0)
    heap.samples.each do |s|
      s.location_ids.each do |loc|
        heap.locations.fetch(loc).each { |fid, line| by_frame[[heap.function_name(fid), line]] += s.values[alloc] }
      end
    end
    assert(by_frame.any? { |(name, _), n| name == "ItBlock.tripled" && n >= 3000 }, by_frame.keys.map(&:first).uniq.inspect)
    lines = by_frame.select { |(name, _), n| name == "Object#multi_line_call" && n >= 1000 }.keys.map(&:last)
    assert_equal [truth["multi_line_call"]], lines.uniq, "Ruby #{RUBY_VERSION} records the Array at line #{truth["multi_line_call"]}"
    wall = Fathom::Pprof.read_file(File.join(@dir, "wall.pb.gz"))
    assert(wall.samples.any? { |s| s.labels["step"] == "loop" }, "wall samples carry the label")
  end

  private

  def assert_profiles_show_the_workers(out)
    heap = PprofRaw.read("#{out}.heap.pb.gz")
    assert_operator heap.total("alloc_objects"), :>, 1_000
    threads = heap.by_label("alloc_objects", "thread").keys
    assert_operator threads.grep(/worker-/).size, :>=, 2, "allocation samples from several workers: #{threads.inspect}"

    gc = Fathom::Report::GcSummary.new(Fathom::Pprof.read_file("#{out}.gc.pb.gz"))
    assert_operator gc.gc_count("minor") + gc.gc_count("major"), :>, 0

    report, err, status = TestHelper.run_fathom("report", "#{out}.retention.pb.gz", "--top", "5")
    assert status.success?, err
    assert_match(/ThreadedFixture::KEPT \(Array\)/, report)
  end
end
