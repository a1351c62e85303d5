# frozen_string_literal: true

require_relative "../test_helper"
require_relative "../support/native_frames"
require "digest"

# Signals that capture native stacks (CaptureNativePcs from the ucontext,
# through libgcc's unwinder) landing anywhere: in thread creation and exit,
# deep recursion past both depth limits, exceptions unwinding, GVL release
# in zlib, allocation. Runs under ASan+UBSan too (rake test:asan).
class NativeCaptureCrashTest < Minitest::Test
  def setup
    require_native!
    NativeFrames.require!
  end

  def recurse(n, &block)
    n.zero? ? yield : [n].each { recurse(n - 1, &block) }
  end

  def test_signals_everywhere_at_100us
    data = Random.new(7).bytes(1 << 18)
    deep = "y" * (4 << 20)
    samples = FathomTest::NativeFrames.sample_native(100) do
      20.times do |i|
        Thread.new { Zlib::Deflate.deflate(data) }.join
        recurse(300) { Digest::SHA256.hexdigest(deep) }
        begin
          recurse(50) { raise ArgumentError, "deep #{i}" }
        rescue ArgumentError
          nil
        end
        Array.new(2_000) { |k| "s#{k}" }.sort!
      end
    end
    refute_empty samples # >= 40 by the clock (below)
    samples.each do |s|
      assert_operator s[:native].size, :<=, 128
      assert_operator s[:ruby].size, :<=, 256
    end
    # Samples in the deep recursion hit the Ruby limit (most of the CPU
    # time is spent there: 20 x SHA256 of 4 MiB).
    # Not luck: the CPU timer fires at every 4 ms kernel tick of this
    # thread's CPU, and the 20 hashes (>= 12 ms each) hold >= 40 of them,
    # all at depth 256 (GC is off in the block); measured 67-117 of 69-123.
    assert(samples.any? { |s| s[:ruby].size == 256 }, "#{samples.size} samples, none at the depth limit")
  end

  def test_gc_during_the_block_is_refused_cleanly
    error = assert_raises(Fathom::Error) do
      FathomTest::NativeFrames.sample_native(100) do
        GC.start
        GC.compact if GC.respond_to?(:compact)
      end
    end
    assert_match(/GC ran/, error.message)
    assert_equal false, GC.disable
    GC.enable
  end

  def test_start_stop_cycles
    50.times do
      FathomTest::NativeFrames.sample_native(100) { 200.times { |i| i.to_s * 10 } }
    end
    pass
  end
end
