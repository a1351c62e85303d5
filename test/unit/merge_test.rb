# frozen_string_literal: true

require "test_helper"
require "support/cli_runner"

# `fathom merge A B ... -o C` (Report::Merge, Pprof::Writer): profiles of
# one kind added into one, written atomically under the output rules of
# every other command. Real profiles: test/integration/csv_import_reports_test.rb.
class MergeTest < Minitest::Test
  include CLIRunner

  CPU_TYPES = [%w[samples count], %w[cpu nanoseconds], %w[wall nanoseconds]].freeze

  def setup
    skip_unless_protoc!
    @dir = Dir.mktmpdir("fathom-merge")
  end

  def teardown
    FileUtils.rm_rf(@dir)
  end

  def write(name, text_profile)
    path = File.join(@dir, name)
    File.binwrite(path, text_profile.gzipped)
    path
  end

  def worker(pid, leak)
    t = TextProfile.new
    t.sample(%w[Cache#store Worker#run main], [leak, leak * 100, leak, leak * 100], { "class" => "String" })
    t.sample(%w[Parser#parse Worker#run main], [10, 500, 0, 0], { "class" => "Array" })
    t.default_sample_type = "inuse_space"
    t.time_nanos = 1_000_000_000 * pid
    t.duration_nanos = 60_000_000_000
    t.comments = ["fathom heap profile, exact mode (every allocation)",
                  "Samples: #{leak + 10} behind alloc_*, #{leak} behind inuse_* (per row: sample types alloc_samples, inuse_samples)",
                  "pid=#{pid}"]
    t
  end

  def test_merges_values_stacks_and_labels
    a = write("w1.pb.gz", worker(1, 30))
    b = write("w2.pb.gz", worker(2, 70))
    out = File.join(@dir, "all.pb.gz")
    r = run_cli("merge", a, b, "-o", out)
    assert_equal 0, r.status, r.err
    assert_match(/fathom: merged 2 heap profiles \(2 distinct stacks\) into #{Regexp.escape(out)}/, r.out)
    merged = Fathom::Pprof.read_file(out)
    store = merged.samples.find { |s| merged.stack_names(s).first == "Cache#store" }
    assert_equal [100, 10_000, 100, 10_000], store.values
    assert_equal({ "class" => "String" }, store.labels)
    assert_equal %w[Cache#store Worker#run main], merged.stack_names(store)
    # The earliest start to the latest end; per-file comments summed or left out.
    assert_equal [1_000_000_000, 61_000_000_000], [merged.time_nanos, merged.duration_nanos]
    assert_includes merged.comments, "fathom heap profile, exact mode (every allocation)"
    assert_includes merged.comments, "Samples: 120 behind alloc_*, 100 behind inuse_* (per row: sample types alloc_samples, inuse_samples)"
    refute(merged.comments.any? { |c| c.start_with?("pid=") })
    assert_includes merged.comments, "fathom merge: 2 profiles added (#{a}, #{b})"
    assert_match(/9\.77kB\s+100%\s+100%\s+9\.77kB\s+100%  Cache#store app\.rb:\d+$/, run_cli("report", out).out)
  end

  def test_go_tool_pprof_reads_the_merge
    skip_unless_go!
    out = File.join(@dir, "all.pb.gz")
    assert_equal 0, run_cli("merge", write("a.pb.gz", worker(1, 30)), write("b.pb.gz", worker(2, 70)), "-o", out).status
    top = go_pprof("-top", "-sample_index=inuse_space", out)
    assert_match(/^\s+9\.77kB\s+100%\s+100%\s+9\.77kB\s+100%\s+Cache#store$/, top)
  end

  def test_refuses_profiles_that_do_not_add_up
    heap = write("heap.pb.gz", worker(1, 30))
    cpu = TextProfile.new(CPU_TYPES)
    cpu.sample(%w[work main], [1, 10_000_000, 10_000_000])
    cpu.comments = ["fathom.cpu.mode=cpu interval_ns=10000000 dropped=0 states=gvl-flag"]
    cpu_path = write("cpu.pb.gz", cpu)
    out = File.join(@dir, "m.pb.gz")
    r = run_cli("merge", heap, cpu_path, "-o", out)
    assert_equal 1, r.status
    assert_match(/cannot merge a cpu profile \(#{Regexp.escape(cpu_path)}\) into a heap profile \(#{Regexp.escape(heap)}\): merge takes profiles of one kind/, r.err)
    wall = TextProfile.new(CPU_TYPES)
    wall.sample(%w[work main], [1, 10_000_000, 10_000_000])
    wall.comments = ["fathom.cpu.mode=wall interval_ns=10000000 dropped=0 states=gvl-flag"]
    r = run_cli("merge", cpu_path, write("wall.pb.gz", wall), "-o", out)
    assert_equal 1, r.status
    assert_match(/cannot merge a wall profile .* with a cpu profile .*: CPU and wall time do not add up/, r.err)
    firefox = File.join(@dir, "gc.json.gz")
    File.binwrite(firefox, TestHelper.gzip('{"meta":{"product":"Fathom gc profile"},"threads":[]}'))
    r = run_cli("merge", heap, firefox, "-o", out)
    assert_equal 1, r.status
    assert_match(/a Firefox Profiler file; fathom merge adds pprof profiles/, r.err)
    refute File.exist?(out)
  end

  def test_writes_under_the_output_rules
    a = write("a.pb.gz", worker(1, 30))
    b = write("b.pb.gz", worker(2, 70))
    assert_match(/missing -o OUT/, run_cli("merge", a, b).err)
    assert_match(/need two or more profiles to merge, got 1/, run_cli("merge", a, "-o", File.join(@dir, "x.pb.gz")).err)
    assert_match(/-o\/--out .*a\.pb\.gz is one of the profiles to merge/, run_cli("merge", a, b, "-o", a).err)
    # An input naming no usable path (a home of no such user) is an input
    # that cannot be read, not an ArgumentError from File.expand_path.
    r = run_cli("merge", a, "~fathom-no-such-user/x.pb.gz", "-o", File.join(@dir, "x.pb.gz"))
    assert_equal 1, r.status
    assert_match(/fathom merge: ~fathom-no-such-user\/x\.pb\.gz: cannot read it: No such file or directory/, r.err)
    foreign = File.join(@dir, "notes.pb.gz")
    File.write(foreign, "mine")
    r = run_cli("merge", a, b, "-o", foreign)
    assert_equal 2, r.status
    assert_match(/Fathom did not write it; refusing to overwrite it \(choose another path, or pass --force\)/, r.err)
    assert_equal "mine", File.read(foreign)
    assert_equal 0, run_cli("merge", a, b, "-o", foreign, "--force").status
    # A merge is Fathom's file: the next merge replaces it without --force.
    assert_equal 0, run_cli("merge", a, b, "-o", foreign).status
    assert_equal 0o600, File.stat(foreign).mode & 0o777
  end

  def test_the_writer_round_trips
    t = worker(1, 30)
    t.sample(%w[Cache#store main], [1, 2, 3, 4], { "bytes" => [42, "bytes"], "thread" => "main" })
    profile = Fathom::Pprof.decode(t.gzipped)
    again = Fathom::Pprof.decode(Fathom::Pprof::Writer.gzip(profile))
    (Fathom::Pprof::Profile.members - [:string_table]).each do |field|
      profile[field].nil? ? assert_nil(again[field], field) : assert_equal(profile[field], again[field], field)
    end
  end
end
