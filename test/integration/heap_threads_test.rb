# frozen_string_literal: true

require "test_helper"
require "json"
require "support/nogvl_burn"

# The heap sampler beside other threads in every state (issue 22): each
# scenario runs test/fixtures/heap_threads.rb in its own process, so that
# nothing of this process's threads (minitest's among them) interferes.
#
# What must hold: ticks reach the thread running Ruby code whatever the
# other threads do, so the samples per second of that thread's CPU time are
# the same as with no other thread. Ticks follow the CPU time of the thread
# running Ruby (TickPacer), so raw counts follow the main thread's CPU time,
# which for the same loop differs by vCPU on these machines (one runs it
# much slower): the rate per CPU second is the comparison that stays true.
#
# Chance: no sampling luck is involved in these counts. Bursts come from
# the timer at each interval of the runner's CPU time; each burst takes 64
# candidates (samples_taken). The spread over runs is timing (which vCPU,
# other processes), measured at +-10% on 3.1 and 3.3 (issue 22's note),
# against the +-25% asked. The share test below is a ratio of Horvitz-
# Thompson estimates from ~600 bursts of 64 candidates each: its standard
# error is ~0.3 pp (measured spread 74.5-75.9% against 75%), and 5 pp is
# over 15 standard errors away (P < 1e-40 for a normal tail).
class HeapThreadsTest < Minitest::Test
  FIXTURE = File.expand_path("../fixtures/heap_threads.rb", __dir__)
  SCENARIOS = %w[parked gvl_wait sleeping nogvl].freeze
  # Loops long enough for ~40 bursts at the interval or more (~0.1 s of CPU
  # per 30k-40k iterations here, depending on the Ruby and the vCPU).
  ITERATIONS = { "1ms" => 30_000, "10ms" => 160_000 }.freeze

  def setup
    require_native!
  end

  def run_scenario(scenario, interval, iterations: ITERATIONS.fetch(interval))
    env = TestHelper::PLAIN_ENV.merge("HEAP_THREADS_ITERATIONS" => iterations.to_s)
    out, err, status = Open3.capture3(env, RbConfig.ruby, "-I", TestHelper::LIB, "-I", NoGvlBurn.load_path, FIXTURE,
                                     scenario, interval)
    assert status.success?, "#{scenario} #{interval}: #{err}"
    JSON.parse(out.lines.last)
  end

  def rate(result)
    result["stats"]["samples_taken"] / result["main_cpu"]
  end

  def describe(name, r)
    s = r["stats"]
    format("%-9s samples %6d bursts %4d ticks %4d (armed %d, idle %d) jobs %4d cpu %.3fs wall %.3fs rate %.0f/s",
           name, s["samples_taken"], s["bursts"], s["timer_ticks"], s["timer_armed_skips"], s["timer_idle_ticks"],
           s["timer_jobs"], r["main_cpu"], r["wall"], rate(r))
  end

  %w[1ms 10ms].each do |interval|
    define_method("test_samples_at_#{interval}_whatever_the_other_threads_do") do
      alone = run_scenario("alone", interval)
      lines = [describe("alone", alone)]
      results = SCENARIOS.to_h { |s| [s, run_scenario(s, interval)] }
      results.each { |s, r| lines << describe(s, r) }
      table = lines.join("\n")
      # At >= 20 bursts one burst more or less is 5%, against the 25% asked.
      assert_operator alone["stats"]["bursts"], :>=, 20, "too short a loop to compare:\n#{table}"
      results.each do |scenario, r|
        assert_in_delta 1.0, rate(r) / rate(alone), 0.25, "#{scenario} at #{interval}:\n#{table}"
        # The ticks that could start a burst did (a lost tick is one whose job
        # never ran: the 3.3 trigger on a parked thread lost most of them).
        lost = r["stats"]["window_lost_ticks"] || 0
        assert_operator lost, :<=, [2, 0.1 * r["stats"]["bursts"]].max, "#{scenario}: #{lost} ticks lost\n#{table}"
        assert_match(/\ASampling: \d+ bursts from \d+ timer ticks/, r["comments"].grep(/\ASampling:/).first.to_s)
      end
    end
  end

  def test_threads_allocating_concurrently_get_their_shares
    r = run_scenario("shares", "1ms", iterations: 60_000)
    est = r["estimate"]
    truth = r["truth"]
    share = est["a"].to_f / (est["a"] + est["b"])
    true_share = truth["a"].to_f / (truth["a"] + truth["b"])
    assert_in_delta true_share, share, 0.05, "estimated #{est} against #{truth}"
    # And the estimated totals: each sample stands for the allocations
    # since the previous one, so the sum is the count (within 5%).
    assert_in_delta truth.values.sum, est.values.sum, 0.05 * truth.values.sum, "#{est} vs #{truth}"
  end
end
