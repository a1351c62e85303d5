# frozen_string_literal: true

require "test_helper"
require "support/pprof_raw"

# Sampled mode thins each tick's candidates by bytes at commit (see
# IMPLEMENTATION.md "Thinning by bytes"): an object at least the threshold
# is always kept, a small one with probability bytes / threshold and a
# weight 1/p larger. Read back with go tool pprof.
class HeapThinningTest < Minitest::Test
  # One object per call each (a frozen literal: `"x" * n` would allocate the
  # literal too). 200 small per big, so the threshold settles near 160 B
  # (a quarter kept on average) and the 2 KB strings are always kept. Not
  # bigger or slower: an allocation that takes long draws the timer's ticks
  # (the known bias of time-based sampling, IMPLEMENTATION.md: a 1.2 MB
  # site read ~20% low), which is not what this test is about.
  module Sites
    X = "x".freeze
    def self.small = Object.new
    def self.big = X * 2000
  end

  SMALL_PER_BIG = 200

  def setup
    require_native!
    skip_unless_go!
    @dir = Dir.mktmpdir("fathom-thin")
  end

  def teardown
    FileUtils.rm_rf(@dir)
  end

  def test_small_candidates_are_thinned_big_ones_kept_and_counts_stay_unbiased
    path = File.join(@dir, "thin.pb.gz")
    rounds = 0
    stats = nil
    Fathom.profile(mode: :heap, out: path, interval: 0.0005) do |profiler|
      # Until ~400 ticks' worth of candidates, however loaded the machine.
      until (stats = profiler.stats)[:samples_taken] >= 400 * 64 || rounds >= 400
        100.times do
          SMALL_PER_BIG.times { Sites.small }
          Sites.big
        end
        rounds += 1
      end
    end
    raw = PprofRaw.read(path)
    assert_operator stats[:samples_thinned], :>, 0, stats.inspect
    assert_operator stats[:commits], :<, stats[:samples_taken] / 2, "about a quarter are kept: #{stats.inspect}"

    small = site(raw, /Sites\.small/)
    big = site(raw, /Sites\.big/)
    assert_operator big[:samples], :>=, 20, "big site: #{big}"
    # A kept small object stands for 1/p times more allocations than a big
    # one taken in the same ticks (p = 40 B / threshold): its mean weight is
    # several times the big site's.
    ratio = small[:weight].fdiv(big[:weight])
    assert_operator ratio, :>, 2.0, "mean weight small #{small[:weight]} vs big #{big[:weight]}"
    # Horvitz-Thompson keeps the counts unbiased: 200 small per big.
    assert_in_delta SMALL_PER_BIG, small[:objects].fdiv(big[:objects]), SMALL_PER_BIG * 0.35,
                    "alloc_objects small #{small[:objects]} big #{big[:objects]} (#{rounds} rounds)"
  end

  private

  def site(raw, pattern)
    objects = raw.cum("alloc_objects", pattern)
    samples = raw.cum("alloc_samples", pattern)
    { objects: objects, samples: samples, weight: samples.zero? ? 0 : objects.fdiv(samples) }
  end
end
