# frozen_string_literal: true

require "test_helper"
require "fathom/cli"

# Issue 43, defects 5 and 6: a report's header says what the profile is in
# words, once (the writer's comments — "fathom.cpu.mode=cpu
# interval_ns=10000000", "interval 10000000ns" — and the notes on how
# estimates are made only with notes: / --notes); an empty profile says
# so; a sampled heap profile that cannot name its in-use memory says in
# one line to rerun with --exact.
class ReportHeaderTest < Minitest::Test
  HEAP_TYPES = [%w[alloc_objects count], %w[alloc_space bytes], %w[inuse_objects count], %w[inuse_space bytes],
                %w[alloc_samples count], %w[inuse_samples count]].freeze
  CPU_TYPES = [%w[samples count], %w[cpu nanoseconds], %w[wall nanoseconds]].freeze
  SAMPLED = ["fathom heap profile, sampled mode (interval 10000000ns)",
             "Samples: 720 behind alloc_*, 43 behind inuse_* (per row: sample types alloc_samples, inuse_samples)",
             "Live bytes: calibrated to a heap census of 19438 objects (10814714 bytes) allocated since the profiler " \
             "started (inuse_* cover all of that time; Duration is alloc_*'s window), in 48 class/type/size classes",
             "pid=4242", "hostname=web-1", "ruby=3.1.2 (x86_64-linux-gnu)"].freeze
  CPU_COMMENT = "fathom.cpu.mode=cpu interval_ns=10000000 dropped=0 states=gvl-flag"

  def setup
    skip_unless_protoc!
  end

  def report(text_profile, **opts)
    Fathom::Report.for_bytes(text_profile.gzipped, **opts).to_s
  end

  def sampled_heap
    t = TextProfile.new(HEAP_TYPES)
    t.sample(%w[Leak#site main], [40, 4_000_000, 40, 4_000_000, 40, 40], { "class" => "String" })
    t.sample(%w[Other#site main], [90, 9_000, 50, 5_000, 90, 50], { "class" => "Array" })
    t.comments = SAMPLED.dup
    t.default_sample_type = "inuse_space"
    t.duration_nanos = 1_500_000_000
    t
  end

  def test_a_sampled_heap_profile_is_said_in_words
    text = report(sampled_heap)
    first, second = text.lines.map(&:chomp)
    assert_equal "Heap profile, sampled mode: a burst of samples every 10ms of CPU time (720 samples, 43 of them " \
                 "live at the end); values are estimates", first
    assert_equal "Process: pid 4242 on web-1, Ruby 3.1.2", second
    refute_match(/10000000ns|interval_ns|Live bytes: calibrated|inuse_\* are calibrated|^pid=/, text)
    notes = report(sampled_heap, notes: true)
    SAMPLED.each { |c| assert_includes notes, c }
    assert_match(/^samples: sample records behind flat/, notes)
  end

  def test_an_exact_heap_profile_is_said_in_words
    t = sampled_heap
    t.comments = ["fathom heap profile, exact mode (every allocation)",
                  "Samples: 130 behind alloc_*, 90 behind inuse_* (per row: sample types alloc_samples, inuse_samples)"]
    text = report(t)
    assert_equal "Heap profile, exact mode: every allocation recorded (130 allocations, 90 of them live at the end)",
                 text.lines.first.chomp
    refute_match(/^Samples:/, text)
  end

  def test_a_cpu_profile_is_said_in_words
    t = TextProfile.new(CPU_TYPES)
    t.sample(%w[work main], [3, 30_000_000, 30_000_000], { "thread name" => "main", "thread id" => [1, nil], "state" => "running" })
    t.comments = [CPU_COMMENT]
    t.default_sample_type = "cpu"
    text = report(t)
    assert_equal "CPU profile: each thread sampled every 10ms of its CPU time", text.lines.first.chomp
    refute_includes text, "fathom.cpu.mode"
    assert_includes report(t, notes: true), CPU_COMMENT
  end

  # Defect 5: zero samples is a warning, not an empty table alone.
  def test_an_empty_cpu_profile_says_why_it_is_empty
    t = TextProfile.new(CPU_TYPES)
    t.comments = [CPU_COMMENT]
    t.default_sample_type = "cpu"
    text = report(t)
    assert_match(/^Warning: the profile has no samples \(a thread is sampled every 10ms of its CPU time: the program ran for less than that/, text)
    cli = Fathom::CLI.new(stdout: StringIO.new(out = +""), stderr: StringIO.new)
    path = File.join(Dir.mktmpdir("fathom-empty"), "cpu.pb.gz")
    File.binwrite(path, t.gzipped)
    assert_equal 0, cli.run(["report", path])
    assert_match(/^Warning: the profile has no samples/, out)
  ensure
    FileUtils.rm_rf(File.dirname(path)) if path
  end

  def test_filters_that_leave_nothing_say_so
    text = report(sampled_heap, focus: "Nothing#matches")
    assert_match(/^Filtered: focus Nothing#matches \(0 of 2 samples kept\)$/, text)
    assert_match(/^Warning: no sample is left after focus Nothing#matches/, text)
  end

  # In-use mostly in "[not sampled]" rows: one line, what to do.
  def test_a_sampled_profile_that_cannot_name_its_memory_says_rerun_with_exact
    t = sampled_heap
    t.sample(["[not sampled] String 320 KB-384 KB"], [0, 0, 8, 2_600_000, 0, 0], { "class" => "String" })
    t.files["[not sampled] String 320 KB-384 KB"] = ["", 0]
    text = report(t)
    warnings = text.lines.grep(/rerun with --exact/)
    assert_equal 1, warnings.size, text
    assert_match(/^Warning: 39% of inuse_space is in "\[not sampled\]" rows, live objects no sample reached: rerun with --exact to name their lines \(this run took 1\.50s: exact mode suits a run this short\)$/, warnings.first)
    refute_match(/rerun with --exact/, report(sampled_heap), "named: no warning")
    refute_match(/rerun with --exact/, report(t, sample_index: "alloc_space"), "allocations have no [not sampled] rows")
  end
end
