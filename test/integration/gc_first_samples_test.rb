# frozen_string_literal: true

require "test_helper"
require "support/pprof_raw"

# No stack is read while a GC runs. A thread the GC does not stop keeps the
# stack of its previous sample; one with no previous sample yet (its first
# samples fell in a GC) gets its next stack when it ran no Ruby code in
# between (cpu_aggregate.h). test/fixtures/gc_first_samples.rb: a main
# thread doing nothing but full GCs for 0.6 s, beside a sleeper and a
# compressor (one long deflate without the GVL) that were there before the
# start, and a napper that works 1 ms and sleeps 30 ms over and over. Before the fix, on 3.1 the wall sleeper showed ~600 ms of "(stack
# not read: GC running)" in the running state (CI, issue of stop 37); on
# 3.3 the CPU-mode compressor ~600 ms of it.
#
# Chance: none of it is sampling luck. Every sample of these threads in the
# GC stretch is held and resolved by the thread's first sample after it
# (the main thread then sleeps 0.2 s, no GC, so that sample is read): the
# sleeper takes ~20 of them in wall mode on 3.1, the compressor ~20 in CPU
# mode. The held samples resolve by the sleeper's CPU clock (3.1, it stays
# under a quarter of the wall time) or by the GVL events (3.2+, exact).
class GcFirstSamplesTest < Minitest::Test
  FIXTURE = File.expand_path("../fixtures/gc_first_samples.rb", __dir__)
  NOT_READ = "(stack not read: GC running)"

  def setup
    require_native!
    skip "go tool pprof is not available" unless PprofRaw.go_available? || TestHelper.ci?
    @dir = Dir.mktmpdir("fathom-gc-first")
  end

  def teardown
    FileUtils.rm_rf(@dir)
  end

  def profile(mode)
    out = File.join(@dir, "#{mode}.pb.gz")
    _o, err, status = Open3.capture3(TestHelper::PLAIN_ENV, RbConfig.ruby, "-I", TestHelper::LIB, FIXTURE, mode, out)
    assert status.success?, "fixture failed: #{err}"
    @truth = JSON.parse(File.read("#{out}.json"))
    PprofRaw.read(out)
  end

  # [state, ms, leaf] per sample of the thread, for failure messages.
  def rows(raw, mode, thread)
    i = raw.index_of(mode)
    raw.samples.select { |s| s.labels["thread name"] == thread }
       .map { |s| [s.labels["state"], (s.values[i] / 1e6).round(1), s.functions.first] }
  end

  def test_a_sleeper_shows_its_sleep_through_the_gcs
    raw = profile("wall")
    sleeper = rows(raw, "wall", "sleeper")
    mine = { "thread name" => "sleeper" }
    assert_operator raw.total("wall"), :>, 0
    assert_operator raw.cum("wall", "Kernel#sleep", labels: mine), :>=, 0.99 * raw.sum("wall", mine), sleeper.inspect
    assert_operator sleeper.size, :>=, 1
    refute(sleeper.any? { |_, _, leaf| leaf == NOT_READ }, sleeper.inspect)
    assert(sleeper.all? { |state, _, _| state == "blocked" }, sleeper.inspect)
    assert_equal 0, raw.cum("wall", "Garbage Collection", labels: { "thread name" => "sleeper" }), sleeper.inspect
  end

  # The napper is woken during a GC after it ran Ruby code: its previous
  # stack is Object#work, not where it slept. On 3.2+ the sample waits for
  # the stack its RESUMED reads; on 3.1 it is sampled while asleep anyway.
  # Before, on 3.3, up to ~250 ms of its sleep showed under Object#work, and
  # ~40% of it as "(stack not read)".
  def test_a_thread_woken_during_a_gc_shows_where_it_slept
    raw = profile("wall")
    i = raw.index_of("wall")
    blocked = raw.samples.select { |s| s.labels["thread name"] == "napper" && s.labels["state"] == "blocked" }
    table = blocked.map { |s| [(s.values[i] / 1e6).round(1), s.functions.first(3)] }
    elsewhere = blocked.reject { |s| s.functions.include?("Kernel#sleep") || s.functions == [NOT_READ] }
    assert_empty elsewhere.map { |s| s.functions.first(3) }, table.inspect
    asleep = blocked.select { |s| s.functions.first(2) == ["Kernel#sleep", "Object#nap"] }.sum { |s| s.values[i] }
    # Not read: its stack at stop, or a wake whose RESUMED came after the
    # profile; measured 0-7% of its blocked time on 3.3 (before: 36-44%).
    assert_operator asleep, :>=, 0.75 * blocked.sum { |s| s.values[i] }, table.inspect
  end

  # Ruby 3.2+ only: on 3.1 nothing tells whether a thread in C without the
  # GVL came back to Ruby between two samples (its CPU clock moves either
  # way), so its held samples keep "(stack not read)" there, by design.
  def test_c_code_without_the_gvl_shows_its_call_through_the_gcs
    skip "Ruby 3.1 has no GVL events: its held samples stay unread" if RUBY_VERSION < "3.2"
    raw = profile("cpu")
    compressor = rows(raw, "cpu", "compressor")
    mine = { "thread name" => "compressor" }
    # All of its CPU during the profile, as its own clock counted it (not a
    # fixed figure: on a busy machine it gets less CPU, 164 ms at load 14 on
    # 2 cores on 3.3.8 where 200 ms was asked), within 10% and one interval
    # (a sample at either edge).
    cpu = @truth["compressor_cpu_ns"]
    assert_operator cpu, :>, 0, "the compressor ran during the profile"
    assert_in_delta cpu, raw.sum("cpu", mine), (0.10 * cpu) + 10e6,
                    "compressor's CPU clock: #{(cpu / 1e6).round(1)} ms; #{compressor.inspect}"
    assert_operator raw.cum("cpu", "Zlib::Deflate.deflate", labels: mine), :>=, 0.99 * raw.sum("cpu", mine),
                    compressor.inspect
    refute(compressor.any? { |_, _, leaf| leaf == NOT_READ }, compressor.inspect)
  end
end
