# frozen_string_literal: true

require "test_helper"
require "support/profile_helpers"

# "No sample counted live after its object died": objects that die are
# gone from inuse at the next flush, including when their slots are reused
# by new objects and when GC.compact moved them in between.
class LivenessTest < Minitest::Test
  include ProfileHelpers

  # Array.new(n) { Object.new } also allocates the Array and some internal
  # objects; count only the Objects.
  OBJECTS = { "class" => "Object" }.freeze

  class Victims
    def make(n)
      Array.new(n) { Object.new }
    end
  end

  class Successors
    def make(n)
      Array.new(n) { Object.new }
    end
  end

  def setup
    require_native!
    skip_unless_go!
  end

  def check_liveness(exact:, compact:, liveness: :auto)
    n = exact ? scaled(20_000) : scaled(200_000)
    opts = exact ? {} : { liveness: liveness }
    with_profiler(exact: exact, interval: 0.00002, **opts) do |profiler|
      wait_for_first_tick(profiler) unless exact
      victims = Victims.new.make(n)
      GC.compact if compact
      profile = profiler.flush(gc: true)
      assert_equal expected_liveness(exact, liveness), profile.stats[:liveness]
      raw = raw_of(profile)
      live_victims = raw.cum("inuse_objects", /Victims#make/, labels: OBJECTS)
      if exact
        assert_equal n, live_victims
      else
        assert_in_delta n, live_victims, n * 0.5
      end

      victims = nil # rubocop:disable Lint/UselessAssignment
      GC.start
      # Same size class: the freed slots are handed to these objects.
      successors = [Successors.new.make(n)]
      GC.compact if compact
      raw = raw_of(profiler.flush(gc: true))
      assert_equal 0, raw.cum("inuse_objects", /Victims#make/, labels: OBJECTS), "dead victims still counted live"
      live_successors = raw.cum("inuse_objects", /Successors#make/, labels: OBJECTS)
      if exact
        assert_equal n, live_successors
      else
        # On a loaded machine (seen under ASan at load average 8) the timer
        # can miss the whole of one short make; more successors, all kept,
        # give it more chances. A liveness bug that drops live samples fails
        # every round.
        4.times do
          break if live_successors > 0

          successors << Successors.new.make(n)
          GC.compact if compact
          live_successors = raw_of(profiler.flush(gc: true)).cum("inuse_objects", /Successors#make/, labels: OBJECTS)
        end
        assert_operator live_successors, :>, 0, "no live successor after #{successors.size} rounds"
      end
      successors.size
    end
  end

  def test_exact_slot_reuse
    check_liveness(exact: true, compact: false)
  end

  def test_exact_with_compaction
    check_liveness(exact: true, compact: true)
  end

  def test_sampled_slot_reuse
    check_liveness(exact: false, compact: false)
  end

  def test_sampled_with_compaction
    check_liveness(exact: false, compact: true)
  end

  # Both token kinds on every Ruby that can run them, whatever :auto picks.
  def test_sampled_object_id_tokens
    check_liveness(exact: false, compact: true, liveness: :object_id)
  end

  def test_sampled_weakmap_tokens
    check_liveness(exact: false, compact: false, liveness: :weakmap)
  end

  def test_sampled_weakmap_tokens_with_compaction
    skip "ObjectSpace::WeakMap loses entries under GC.compact before Ruby 3.2.3 (bug #19529)" if weakmap_broken_by_compaction?
    check_liveness(exact: false, compact: true, liveness: :weakmap)
  end

  def test_auto_picks_weakmap_from_ruby_3_2_3
    expected = Gem::Version.new(RUBY_VERSION) >= Gem::Version.new("3.2.3") ? :weakmap : :object_id
    assert_equal expected, Fathom::HeapProfiler.new.liveness
  end

  private

  # The timer thread's first tick can come after a short make has finished:
  # seen under ASan on a loaded machine, where the new thread was not run
  # for the whole ~10 ms of Victims#make in half of the rounds, so the
  # profile held no victim at all. Sampling has not started until it ticks.
  def wait_for_first_tick(profiler)
    ticks = profiler.stats[:timer_ticks]
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 5
    sleep 0.001 while profiler.stats[:timer_ticks] == ticks && Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
  end

  def expected_liveness(exact, liveness)
    return "freeobj_hook" if exact

    (liveness == :auto ? Fathom::HeapProfiler::LIVENESS_BY_VERSION : liveness).to_s
  end

  def weakmap_broken_by_compaction?
    Gem::Version.new(RUBY_VERSION) < Gem::Version.new("3.2.3")
  end
end
