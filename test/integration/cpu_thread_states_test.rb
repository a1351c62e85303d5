# frozen_string_literal: true

require "test_helper"
require "json"
require "support/pprof_raw"
require "support/nogvl_burn"

# Thread states mean what they say (issue 22), with four threads present at
# once (test/fixtures/cpu_thread_states.rb): one running Ruby code, one in
# C without the GVL (FathomTest::NoGvl.burn), one asleep and one blocked on a
# pipe, the last two since before the profiler started, while the main
# thread allocates (so GCs run). Read back with go tool pprof, against each
# thread's own CPU clock.
#
# Chance: the CPU figures are sums of measured clock deltas (every sample
# carries its thread's CPU time since its previous one), not counts of
# samples, so they hold up to the time after each thread's last sample
# (one interval, 10 ms, against >= 0.5 s); states come from the GVL events
# or the blocking flag, not from sampling luck.
class CpuThreadStatesTest < Minitest::Test
  FIXTURE = File.expand_path("../fixtures/cpu_thread_states.rb", __dir__)

  def setup
    require_native!
    skip "go tool pprof is not available" unless PprofRaw.go_available? || TestHelper.ci?
    @dir = Dir.mktmpdir("fathom-states")
  end

  def teardown
    FileUtils.rm_rf(@dir)
  end

  def profile(mode)
    out = File.join(@dir, "#{mode}.pb.gz")
    truth = File.join(@dir, "#{mode}.json")
    _o, err, status = Open3.capture3(TestHelper::PLAIN_ENV, RbConfig.ruby, "-I", TestHelper::LIB,
                                     "-I", NoGvlBurn.load_path, FIXTURE, mode, "pprof",
                                     out, truth, "1.5")
    assert status.success?, "fixture failed: #{err}"
    [PprofRaw.read(out), JSON.parse(File.read(truth))]
  end

  def sum(raw, type, thread, **labels)
    raw.sum(type, { "thread name" => thread, **labels })
  end

  def table(raw, type)
    i = raw.index_of(type)
    rows = Hash.new(0)
    raw.samples.each { |s| rows[s.labels.values_at("thread name", "state", "gvl").compact.join(" ")] += s.values[i] }
    rows.sort.map { |k, v| format("  %-32s %8.1f ms", k, v / 1e6) }.join("\n")
  end

  %w[cpu wall].each do |mode|
    define_method("test_#{mode}_mode_running_cpu_is_each_threads_own_cpu_time") do
      raw, truth = profile(mode)
      why = "#{mode} profile, cpu by thread/state:\n#{table(raw, "cpu")}\ntruth (ns): #{truth["cpu_ns"]}"
      %w[burner nogvl].each do |name|
        running = sum(raw, "cpu", name, "state" => "running")
        assert_in_delta 1.0, running.to_f / truth["cpu_ns"][name], 0.10, "#{name}: #{why}"
      end
      # The nogvl thread's CPU is C without the GVL, and says so.
      released = sum(raw, "cpu", "nogvl", "state" => "running", "gvl" => "released")
      assert_operator released, :>=, 0.9 * truth["cpu_ns"]["nogvl"], why
      # The burner never releases the GVL but at its time slices' end (3.3:
      # SUSPENDED then READY at once). A wall sample whose timer fired in
      # that gap is taken at READY still marked "released", with the CPU of
      # its whole interval: seen as one ~10 ms sample in 2 of 9 runs on 3.3.
      # (Reading the CPU clock at SUSPENDED would split it exactly: see the
      # issue 22 note.) It stays a sliver of the burner's CPU. Chance: the
      # bound is ~70 ms of the burner's ~700 ms, 7 such samples; at 0.25 a
      # run (2 in 9), P(>= 7) is below 1e-8. With a `yes` hog beside it on
      # 3.3: none in 12 runs (6 per mode), burner CPU 630-820 ms.
      assert_operator sum(raw, "cpu", "burner", "gvl" => "released"), :<=, 0.1 * truth["cpu_ns"]["burner"], why
      # The ones that only wait were not stopped by any GC and did no GC work.
      assert_operator truth["gc_count"], :>, 0
      %w[sleeper reader].each do |name|
        assert_equal 0, sum(raw, "wall", name, "state" => "gc"), "#{name} charged GC: #{why}"
        gc_frames = raw.samples.select do |s|
          s.labels["thread name"] == name && s.functions.any? { |f| f.include?("Garbage Collection") || f.include?("stack not read") }
        end
        assert_empty gc_frames, "#{name} has samples without its own stack: #{why}"
      end
    end
  end

  # In wall mode the sleeper and the reader are blocked the whole time,
  # although they entered sleep and read before the profiler started.
  def test_wall_mode_threads_that_wait_are_blocked_from_their_first_sample
    raw, = profile("wall")
    why = "wall by thread/state:\n#{table(raw, "wall")}"
    { "sleeper" => "Kernel#sleep", "reader" => "IO#read" }.each do |name, call|
      total = sum(raw, "wall", name)
      blocked = sum(raw, "wall", name, "state" => "blocked")
      assert_operator total, :>, 1.0e9, "#{name} is sampled for the whole profile: #{why}"
      assert_operator blocked, :>=, 0.95 * total, "#{name}: #{why}"
      assert_operator raw.cum("wall", call, labels: { "thread name" => name }), :>=, 0.95 * total, "#{name} in #{call}: #{why}"
    end
  end
end
