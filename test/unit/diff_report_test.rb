# frozen_string_literal: true

require_relative "../test_helper"
require "fathom/pprof/reader"
require "fathom/report/diff"

class DiffReportTest < Minitest::Test
  # A profile whose samples are [stack (root first), bytes, objects].
  def profile(types, *samples)
    functions = {}
    locations = {}
    pprof_samples = samples.map do |stack, *values|
      ids = stack.map do |name|
        id = functions.find { |_, f| f.name == name }&.first || (functions.size + 1)
        functions[id] ||= Fathom::Pprof::Function.new(id, name, name, "", 0)
        locations[id] ||= [[id, 0]]
        id
      end
      Fathom::Pprof::Sample.new(ids.reverse, values, {})
    end
    Fathom::Pprof::Profile.new(types, pprof_samples, locations, functions, {}, [], 0, 0, nil, 0, types.first.first, [], nil, nil)
  end

  RETENTION = [%w[retained_space bytes], %w[inuse_space bytes], %w[inuse_objects count]].freeze
  HEAP = [%w[inuse_space bytes], %w[inuse_objects count]].freeze

  def test_retention_chains_match_however_dominators_cut_them
    # Before: the module dominates the hash. After: a second holder of the
    # hash (say an inline constant cache) makes the root its dominator, so
    # the same chain arrives in one frame instead of two.
    before = profile(RETENTION,
                     [["vm → M (Module)", "H (Hash)", "$hashval (S)"], 100, 100, 10])
    after = profile(RETENTION,
                    [["vm → M → H (Hash)", "$hashval (S)"], 130, 130, 13])
    diff = Fathom::Report::Diff.new(before, after, sample_index: "inuse_space")
    rows = diff.rows
    assert_equal 1, rows.size, diff.to_s
    assert_equal 30, rows.first.growth
    assert_equal 3, rows.first.objects_after - rows.first.objects_before
    assert_equal ["vm → M → H (Hash)", "$hashval (S)"], rows.first.path, "the newest frames are shown"
  end

  def test_the_leaf_class_still_tells_chains_apart
    before = profile(RETENTION, [["vm → M (Module)", "@a (String)"], 10, 10, 1])
    after = profile(RETENTION, [["vm → M (Module)", "@a (Array)"], 10, 10, 1])
    rows = Fathom::Report::Diff.new(before, after, sample_index: "inuse_space").rows
    assert_equal 2, rows.size
  end

  def test_heap_profiles_keep_exact_stacks
    # Allocation stacks are not cut at dominators: "(Hash)"-like suffixes are
    # part of a frame's name there and must not be dropped.
    before = profile(HEAP, [["main", "build (x)"], 10, 1])
    after = profile(HEAP, [["main", "build"], 10, 1])
    rows = Fathom::Report::Diff.new(before, after).rows
    assert_equal 2, rows.size
  end
end
