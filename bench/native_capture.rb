# frozen_string_literal: true

# Cost of one native stack capture (CaptureNativePcs: libgcc's
# _Unwind_Backtrace over DWARF CFI) at native depths of about 20, 60 and
# the 128-frame limit, against rb_profile_frames of the same stack (what a
# sampler pays for the Ruby frames anyway), measured in the same process.
# Not a test. Each depth is built by recursing through Array#each, which
# adds native frames (vm_call_cfunc -> rb_ary_each -> rb_yield -> ... ->
# rb_vm_exec) per level; plain Ruby-to-Ruby calls add none.
#
#   ruby -Ilib bench/native_capture.rb [--iterations 20000] [--rounds 5]
#
# Prints the median of the rounds, per depth, for each unwinder (libunwind,
# then libgcc: FATHOM_NATIVE_UNWINDER=libgcc asks for the latter).
require "rbconfig"
require "fathom"
require_relative "integer_options"
require_relative "../test/support/native_frames" # the test-only extension that times a capture

NativeFrames.require!

iterations, rounds = BenchIntegerOptions.parse(iterations: 20_000, rounds: 5)

def nest(levels, &block)
  levels.zero? ? yield : [0].each { nest(levels - 1, &block) }
end

def median(values) = values.sort[values.size / 2]

# Levels needed for a native depth of at least `target` on this Ruby.
def levels_for(target)
  (0..64).find do |levels|
    depth = nil
    nest(levels) { depth = FathomTest::NativeFrames.capture_cost(1)[1] }
    depth >= target
  end
end

# Both unwinders (native_capture.h), each in a fresh process.
unless ENV["FATHOM_NATIVE_UNWINDER"]
  %w[libunwind libgcc].each do |unwinder|
    system({ "FATHOM_NATIVE_UNWINDER" => unwinder }, RbConfig.ruby, "-I#{File.expand_path("../lib", __dir__)}", __FILE__,
           "--iterations", iterations.to_s, "--rounds", rounds.to_s, exception: true)
  end
  exit
end

puts "ruby #{RUBY_VERSION}, unwinder #{FathomTest::NativeFrames.unwinder}, " \
     "#{iterations} captures per round, median of #{rounds} rounds"
puts format("%-14s %8s %12s %10s %10s %14s %10s", "target depth", "native", "ns/capture", "ns/frame",
            "ruby depth", "ns/rb_profile", "ratio")
[20, 60, 128].each do |target|
  levels = levels_for(target)
  results = Array.new(rounds) do
    r = nil
    nest(levels) { r = FathomTest::NativeFrames.capture_cost(iterations) }
    r
  end
  ns = median(results.map { _1[0] })
  ruby_ns = median(results.map { _1[2] })
  depth = results.first[1]
  puts format("%-14d %8d %12.0f %10.1f %10d %14.0f %9.1fx", target, depth, ns, ns / depth, results.first[3], ruby_ns,
              ns / ruby_ns)
end
puts "cost of native capture at 100 Hz / 1 kHz per sampled thread = ns/capture x 1e-7 / x 1e-6 of a CPU"
