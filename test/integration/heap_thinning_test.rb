# frozen_string_literal: true

require "test_helper"
require "support/pprof_raw"

# Sampled mode thins each tick's candidates by bytes at commit (see
# docs/internals/heap.md "Thinning by bytes"): an object at least the threshold
# is always kept, a small one with probability bytes / threshold and a
# weight 1/p larger. Read back with go tool pprof.
class HeapThinningTest < Minitest::Test
  # One object per call each (a frozen literal: `"x" * n` would allocate the
  # literal too). 200 small per big, so the threshold settles near 160 B
  # (a quarter kept on average) and the 2 KB strings are always kept. Not
  # bigger or slower: an allocation that takes long draws the timer's ticks
  # (the known bias of time-based sampling, docs/internals/heap.md, "The estimator and its bias": a 1.2 MB
  # site read ~20% low), which is not what this test is about.
  module Sites
    X = "x".freeze
    def self.small = Object.new
    def self.big = X * 2000
  end

  SMALL_PER_BIG = 200
  # Ticks to wait for (~0.55 ms each: ~1.4 s). With 400 the count ratio
  # could fail up to 1 run in 350 (bounds at the assertions). The cap on
  # rounds only ends a loop whose sampler stopped (2400 took 223-504).
  BURSTS = 2400

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
      # Until BURSTS ticks' worth of candidates, however loaded the machine.
      until (stats = profiler.stats)[:samples_taken] >= BURSTS * 64 || rounds >= BURSTS
        100.times do
          SMALL_PER_BIG.times { Sites.small }
          Sites.big
        end
        rounds += 1
      end
    end
    raw = PprofRaw.read(path)
    # N >= 153,600 candidates, 99.5% of them 40 B objects kept with
    # p = 40/S <= 0.3: P(none thinned) < 0.3^150000.
    assert_operator stats[:samples_thinned], :>, 0, stats.inspect
    # S's update makes sum(p) = N/4 + ln(S_end/1 KB)/0.08 <= N/4 + 87; the
    # kept count is a sum of coins around it. Freedman, t = N/4 - 87:
    # P(kept >= N/2) <= exp(-t^2 / (2(N/4 + 87 + t/3))) < e^-14000.
    assert_operator stats[:commits], :<, stats[:samples_taken] / 2, "about a quarter are kept: #{stats.inspect}"

    small = site(raw, /Sites\.small/)
    big = site(raw, /Sites\.big/)
    # A burst (64 candidates over ~128 allocations) takes the one big of a
    # 201-allocation round with q = 64/201 (measured 0.317), always kept:
    # K ~ Bin(n >= 2400, 0.32), mean ~760. Chernoff: P(K < 20) < e^-800.
    assert_operator big[:samples], :>=, 20, "big site: #{big}"
    # A kept small object stands for 1/p times more allocations than a big
    # one taken in the same ticks (p = 40 B / threshold): its mean weight is
    # several times the big site's.
    # ratio = S/40 (~4) x mean burst weight w_b of the kept small / that of
    # the ~760 bursts that took a big (chosen independently of w_b): <= 2
    # needs the latter >= 1.6x the mean. Chernoff, w_b as measured at 0.5 ms
    # (40,000 bursts, this 2-vCPU VM under load: CV 0.3, max 14x): < e^-160;
    # adding a stall tail (1 burst in 1,000 at 50x): < 1e-7.
    ratio = small[:weight].fdiv(big[:weight])
    assert_operator ratio, :>, 2.0, "mean weight small #{small[:weight]} vs big #{big[:weight]}"
    # Horvitz-Thompson keeps the counts unbiased: 200 small per big.
    # The big count is sum(w_b) over the bursts that took a big: relative
    # sd sqrt((1-q)/(q n) (1 + CV^2)) = 3.0% at n = 2400 (measured over 30
    # runs each: 3.0% on 3.1, 3.4% on 3.3); the small count rests on ~38,000
    # kept samples (< 1%). > 270 needs the big count 26% low, < 130 54%
    # high. Chernoff on sum(S_b - 270 B_b) and sum(130 B_b - S_b), w_b as
    # above: < 5e-16 (< 4e-7 with the stall tail); normal at a loaded
    # machine's 4.5% sd: 5.8 sd, < 1e-8. At 400 bursts: 3e-3 (seen: 140).
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
