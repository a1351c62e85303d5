# frozen_string_literal: true

require "test_helper"
require "support/fault_injection"

# Every door of ext/fathom/ruby/runtime/boundary.h, made to fail: the sanitizer
# build (rake test:asan) compiles FATHOM_FAULT_POINTs, and
# FATHOM_INJECT_FAULT=site[:length_error] makes one of them throw
# std::bad_alloc (or std::length_error). Each case runs a Ruby subprocess
# (inheriting the ASan environment) that drives the path, and checks that
#   - a method path raises a Ruby exception (NoMemoryError for bad_alloc,
#     Fathom::Error for other C++ exceptions), after which the profiler is
#     stopped cleanly or still works;
#   - a hook path (Ruby called us: NEWOBJ, a postponed job) is survived and
#     counted in Fathom::Native.internal_errors;
#   - the process exits normally: no abort, no sanitizer report.
# The native classes are driven directly so the scripts do not depend on
# the Ruby-side profiler classes.
class BoundaryFaultTest < Minitest::Test
  include FaultInjection

  # ---- hook paths: survived and counted

  def test_newobj_hook
    each_fault("newobj_hook") do |fault|
      result, message = run_with_fault(fault, <<~RUBY)
        c = heap_collector(exact: true)
        c.start
        churn(1000)
        c.stop
        outcome("flush") { c.flush(false, nil) }
        puts "samples=\#{c.stats[:samples_taken]}"
      RUBY
      assert_operator result["errors"].to_i, :>, 0, message
      assert_equal "newobj hook", result["site"], message
      assert_equal "none", result["flush"], message  # nothing was sampled, nothing broke
      assert_equal "0", result["samples"], message
    end
  end

  def test_commit_pending_in_the_postponed_job_and_in_methods
    each_fault("commit_pending") do |fault|
      result, message = run_with_fault(fault, <<~RUBY)
        c = heap_collector(exact: true)
        c.start
        churn(5000)       # batches of 256 trigger the commit job
        [1].each { }      # a safe point: the job runs
        errors_in_job = Fathom::Native.internal_errors[:count]
        puts "job_errors=\#{errors_in_job}"
        outcome("stop") { c.stop }    # commits what is pending: fails, but stops
        puts "running=\#{c.running?}"
        outcome("flush") { c.flush(false, nil) }
        c.start
        outcome("stop_again") { c.stop }
        puts "restarted=\#{!c.running?}"
      RUBY
      assert_operator result["job_errors"].to_i, :>, 0, message
      assert_equal expected_error(fault), result["stop"], message
      assert_equal "false", result["running"], message
      assert_equal expected_error(fault), result["flush"], message
      assert_equal "true", result["restarted"], message
    end
  end

  # ---- method paths: a Ruby exception, then a working or stopped profiler

  def check_flush_fault(site)
    each_fault(site) do |fault|
      result, message = run_with_fault(fault, <<~RUBY)
        [true, false].each do |exact|
          c = heap_collector(exact: exact)
          c.start
          kept = Array.new(20_000) { Object.new }
          outcome("flush_running_\#{exact}") { c.flush(true, nil) }
          outcome("flush_again_\#{exact}") { c.flush(false, nil) }  # not stuck "in progress"
          c.stop
          outcome("flush_stopped_\#{exact}") { c.flush(false, nil) }
          puts "running_\#{exact}=\#{c.running?}"
          kept.size
        end
        # Another collector can start: no global was left behind.
        c = heap_collector(exact: true)
        c.start
        churn(100)
        c.stop
        puts "started_after=true"
      RUBY
      [true, false].each do |exact|
        %w[flush_running flush_again flush_stopped].each do |k|
          assert_equal expected_error(fault), result["#{k}_#{exact}"], "#{k} exact=#{exact}\n#{message}"
        end
        assert_equal "false", result["running_#{exact}"], message
      end
      assert_equal "true", result["started_after"], message
    end
  end

  def test_heap_flush_walk
    check_flush_fault("heap_flush_walk")
  end

  def test_heap_flush_encode_without_gvl
    check_flush_fault("heap_flush_encode")
  end

  def test_gc_encode_without_gvl
    each_fault("gc_encode") do |fault|
      result, message = run_with_fault(fault, <<~RUBY)
        g = Fathom::Native::GcCollector.new(0, true, :hooks)
        g.start
        GC.start
        churn(10_000)
        outcome("pprof") { g.flush(:pprof, true, nil) }
        outcome("firefox") { g.flush(:firefox, false, nil) }
        puts "running=\#{g.running?}"
        GC.start
        g.stop
        puts "stopped=\#{!g.running?}"
      RUBY
      assert_equal expected_error(fault), result["pprof"], message
      assert_equal expected_error(fault), result["firefox"], message
      assert_equal "true", result["running"], message
      assert_equal "true", result["stopped"], message
    end
  end

  # Without an injected fault the same scripts run clean: the checks above
  # are about the fault, not about the scripts.
  def test_unknown_site_injects_nothing
    result, message = run_with_fault("no_such_site", <<~RUBY)
      c = heap_collector(exact: true)
      c.start
      churn(1000)
      c.stop
      outcome("flush") { c.flush(false, nil) }
    RUBY
    assert_equal "none", result["flush"], message
    assert_equal "0", result["errors"], message
  end
end
