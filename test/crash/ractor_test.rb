# frozen_string_literal: true

require "test_helper"
require "open3"

# Fathom profiles the main Ractor only (lib/fathom/process/ractor_check.rb). On
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

  def run_script(script, prelude: PRELUDE)
    out, err, status = Open3.capture3(TestHelper::PLAIN_ENV, RbConfig.ruby, "-I#{TestHelper::LIB}", "-e", prelude + script)
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
      puts "heap_liveness=\#{heap.flush.stats[:liveness]}"
    RUBY
    assert_equal "false", result["heap_running"], message
    assert_equal "false", result["gc_running"], message
    assert_equal "stopped", result["heap_ractors"], message
    assert_equal "stopped", result["gc_ractors"], message
    # The exact profiler's FREEOBJ hook went with it (Ruby bug #18464).
    assert_equal "lost", result["heap_liveness"], message
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

  # A Ractor created through a Method taken before Fathom wrapped
  # Ractor.new: the profilers keep running and nothing crashes. Event hooks
  # are registered per Ractor (vm_trace.c connects them to the calling
  # Ractor's list), so on 3.3 the other Ractor's allocations and GCs never
  # reach ours ("none"); the native guard (ractor_guard.h) would skip them
  # ("ignored") on a Ruby that dispatched hooks globally. Not on 3.1: there
  # any NEWOBJ or GC hook crashes inside Ruby once another Ractor allocates
  # (bug #18464), before ours is called.
  def test_hooks_skip_a_ractor_created_behind_fathoms_back
    skip "Ruby bug #18464: hooks crash inside Ruby with Ractors before 3.2" if RUBY_VERSION < "3.2"
    prelude = <<~RUBY
      Warning[:experimental] = false
      $stdout.sync = true
      new_ractor = Ractor.method(:new)
      require "fathom"
    RUBY
    result, err, message = run_script(<<~RUBY, prelude: prelude)
      heap = Fathom::HeapProfiler.new(exact: true).start
      gc = Fathom::GcProfiler.new.start
      4.times.map do |k|
        new_ractor.call(k) do |k|
          a = []
          100_000.times { |i| a << "r\#{i}"; a.shift if a.size > 1000 }
          GC.start
          k
        end
      end.map(&:take)
      puts "heap_running=\#{heap.running?}"
      puts "heap_ractors=\#{heap.flush.stats[:ractors]}"
      puts "gc_ractors=\#{gc.flush.stats[:ractors]}"
    RUBY
    assert_equal "true", result["heap_running"], message
    assert_includes %w[none ignored], result["heap_ractors"], message
    assert_includes %w[none ignored], result["gc_ractors"], message
    refute_match(/Ractor.new: stopped/, err)
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
      r.respond_to?(:value) ? r.value : r.take # Ruby 4.0 removed Ractor#take for #value
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
