# frozen_string_literal: true

require "test_helper"
require "open3"

# Fathom profiles the main Ractor only (lib/fathom/ractor_check.rb). On
# Ruby 3.1.0-3.1.3 a NEWOBJ or GC hook crashes the process as soon as another
# Ractor allocates, so Ractor.new must stop the profilers first, and starting
# one while Ractors run must raise. Each case runs in its own process:
# Ractors cannot be taken back.
class RactorTest < Minitest::Test
  PRELUDE = <<~RUBY
    Warning[:experimental] = false
    require "fathom"
    $stdout.sync = true
    def allocating_ractors
      4.times.map do |k|
        Ractor.new(k) do |k|
          a = []
          100_000.times { |i| a << "r\#{i}"; a.shift if a.size > 1000 }
          k
        end
      end.map(&:take)
    end
  RUBY

  def setup
    require_native!
    skip "no Ractors on this Ruby" unless defined?(Ractor)
  end

  def run_script(script)
    out, err, status = Open3.capture3(TestHelper::PLAIN_ENV, RbConfig.ruby, "-I#{TestHelper::LIB}", "-e", PRELUDE + script)
    message = "stdout:\n#{out}\nstderr:\n#{err}"
    refute_match(/\[BUG\]|Segmentation fault|AddressSanitizer|runtime error/, err, message)
    assert status.success?, message
    [out.lines.map { |l| l.chomp.split("=", 2) }.select { |kv| kv.size == 2 }.to_h, err, message]
  end

  def test_ractor_new_stops_every_profiler_first
    result, err, message = run_script(<<~RUBY)
      heap = Fathom::HeapProfiler.new(exact: true).start
      sampled_gc = Fathom::GcProfiler.new.start
      Array.new(1000) { Object.new }
      allocating_ractors
      puts "heap_running=\#{heap.running?}"
      puts "gc_running=\#{sampled_gc.running?}"
      puts "heap_ractors=\#{heap.flush.stats[:ractors]}"
      puts "gc_ractors=\#{sampled_gc.flush.stats[:ractors]}"
      puts "heap_samples=\#{heap.flush.stats[:samples]}"
    RUBY
    assert_equal "false", result["heap_running"], message
    assert_equal "false", result["gc_running"], message
    assert_equal "stopped", result["heap_ractors"], message
    assert_equal "stopped", result["gc_ractors"], message
    assert_match(/fathom: Ractor.new: stopped Fathom::HeapProfiler, Fathom::GcProfiler; Fathom profiles the main Ractor only/, err)
  end

  def test_sampled_heap_profiler_at_a_short_interval
    result, _err, message = run_script(<<~RUBY)
      heap = Fathom::HeapProfiler.new(interval: 0.001).start
      allocating_ractors
      puts "ractors=\#{heap.flush.stats[:ractors]}"
    RUBY
    assert_equal "stopped", result["ractors"], message
  end

  def test_nothing_starts_while_ractors_run
    result, _err, message = run_script(<<~RUBY)
      r = Ractor.new { Ractor.receive }
      [-> { Fathom::HeapProfiler.new.start },
       -> { Fathom::GcProfiler.new.start },
       -> { Fathom.retention_snapshot(progress: nil) }].each_with_index do |start, i|
        start.call
        puts "case\#{i}=started"
      rescue Fathom::Error => e
        puts "case\#{i}=\#{e.message}"
      end
      r.send(:done)
      r.take
      # A taken Ractor still counts until its thread is torn down, a moment
      # later (seen once on a loaded CI machine).
      deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 10
      sleep 0.01 while Ractor.count > 1 && Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
      # Once the Ractors are gone, profiling works again.
      profile = Fathom.retention_snapshot(progress: nil)
      puts "after=\#{profile.stats[:objects] > 1000}"
    RUBY
    3.times do |i|
      assert_match(/cannot start while Ractors are running \(1 besides the main one\): Fathom profiles the main Ractor only/,
                   result["case#{i}"], message)
    end
    assert_equal "true", result["after"], message
  end
end
