# frozen_string_literal: true

require "test_helper"
require "support/fault_injection"

# The retention snapshot's doors, made to fail (see test/support/
# fault_injection.rb): a C++ failure in any phase — inside Ruby's marking
# callback during the walk, while naming edges, in the analysis or the
# encoding without the GVL — must become a Ruby exception, leave GC enabled
# and no snapshot "in progress", and let the next snapshot work.
class RetentionFaultTest < Minitest::Test
  include FaultInjection

  SCRIPT = <<~RUBY
    kept = Array.new(5_000) { |i| "s\#{i}" }
    outcome("take") do
      s = Fathom::Native::RetentionSnapshot.new(64)
      s.take(false, nil, nil)
      s.flush(nil)
    end
    puts "gc_enabled=\#{!GC.disable.tap { GC.enable }}"
    # Not stuck "in progress", and the walk still works where no fault is armed.
    outcome("again") do
      s = Fathom::Native::RetentionSnapshot.new(64)
      s.take(false, nil, nil)
      s.flush(nil)
    end
    kept.size
  RUBY

  def check_phase(site, expected)
    each_fault(site) do |fault|
      result, message = run_with_fault(fault, SCRIPT)
      assert_equal expected.call(fault), result["take"], message
      assert_equal "true", result["gc_enabled"], message
      # The same phase fails again (the fault stays armed), but cleanly.
      assert_equal expected.call(fault), result["again"], message
    end
  end

  # Inside rb_objspace_reachable_objects_from's callback no exception may
  # propagate: the walk records it, stops, and raises Fathom::Error.
  def test_walk_callback
    check_phase("retention_walk", ->(_fault) { "Fathom::Error" })
  end

  def test_edge_names
    check_phase("retention_edge_names", method(:expected_error))
  end

  def test_analysis_without_gvl
    check_phase("retention_analyze", method(:expected_error))
  end

  def test_encoding_without_gvl
    check_phase("retention_encode", method(:expected_error))
  end
end
