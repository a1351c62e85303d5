# frozen_string_literal: true

require "test_helper"
require "fathom/pprof/reader"

# Exact mode at depth: every frame and every line of a deep stack is right,
# and stacks that agree on their innermost frames but differ far from the
# leaf are kept apart, with exact counts. The stack table answers repeated
# stacks from a cache keyed by the innermost frames and proves each hit by
# comparing the whole stack (core/stacks/stack_table.h); these are the cases
# where a cache trusting the innermost frames would give a wrong stack.
# Deterministic: exact mode records every allocation.
class ExactDeepStackTest < Minitest::Test
  class DeepMarker; end

  ROUNDS = 60
  HERE = File.expand_path(__FILE__)

  def setup
    require_native!
  end

  # Recurses `depth` frames, then allocates `per_leaf` markers, recording
  # each leaf's Ruby stack (this file's frames, leaf first) as the truth.
  def descend(depth, per_leaf, truth)
    return leaf(per_leaf, truth) if depth.zero?

    descend(depth - 1, per_leaf, truth)
  end

  def leaf(per_leaf, truth)
    # The truth is taken on the allocation's own line, so its leaf line is
    # the allocation's.
    per_leaf.times { truth << [here, DeepMarker.new].first }
  end

  def here
    # Integer#times, a C method, is reported with its caller's file and line
    # by caller_locations, and as a "<cfunc>" frame in the profile: left out.
    caller_locations(1).select { |l| File.expand_path(l.path) == HERE && !l.label.end_with?("times") }.map(&:lineno)
  end

  # Two entries into the same deep recursion from two different lines: the
  # stacks differ only at their outermost frames of this file.
  def via_first_line(depth, per_leaf, truth) = descend(depth, per_leaf, truth)
  def via_second_line(depth, per_leaf, truth) = descend(depth, per_leaf, truth)

  def profile(max_depth)
    profiler = Fathom::HeapProfiler.new(exact: true, max_depth: max_depth)
    truths = { first: [], second: [] }
    profiler.start
    begin
      ROUNDS.times do |r|
        # Alternating, so consecutive allocations switch between the two.
        via_first_line(140, 2, truths[:first])
        via_second_line(140, 1, truths[:second]) if r.even?
      end
    ensure
      profiler.stop
    end
    [Fathom::Pprof.read(profiler.flush(gc: false).bytes), truths]
  end

  # This file's frames of each DeepMarker sample: [[line, ...], alloc_objects].
  def marker_stacks(profile)
    alloc = profile.sample_type_index("alloc_objects")
    profile.samples.filter_map do |s|
      next unless s.labels["class"].to_s.end_with?("DeepMarker")

      lines = s.location_ids.flat_map do |id|
        profile.locations.fetch(id).filter_map do |function_id, line|
          # Line 0: the <main> entry Ruby reports under a script's top frame.
          line if line.positive? && File.expand_path(profile.functions.fetch(function_id).filename) == HERE
        end
      end
      [lines, s.values[alloc]]
    end
  end

  def test_every_frame_of_a_deep_stack_is_right
    profile, truths = profile(512)
    stacks = marker_stacks(profile)
    counts = stacks.each_with_object(Hash.new(0)) { |(lines, n), h| h[lines] += n }
    expected = (truths[:first] + truths[:second]).tally
    assert_equal 2, expected.size, "two distinct stacks by construction"
    assert_operator expected.keys.first.size, :>, 140
    assert_equal expected, counts
    assert_equal ROUNDS * 2, counts.fetch(truths[:first].first)
    assert_equal ROUNDS / 2, counts.fetch(truths[:second].first)
  end

  def test_truncated_deep_stacks_keep_their_innermost_frames
    profile, truths = profile(128)
    counts = marker_stacks(profile).each_with_object(Hash.new(0)) { |(lines, n), h| h[lines] += n }
    # Cut at 128 frames, the two stacks (which differ only further out) are
    # one: all markers, each with the innermost frames of the truth.
    assert_equal 1, counts.size, counts.keys.map(&:size).inspect
    lines, n = counts.first
    assert_equal ROUNDS * 2 + ROUNDS / 2, n
    assert_equal truths[:first].first.first(lines.size), lines
    assert_operator lines.size, :>=, 120
  end
end
