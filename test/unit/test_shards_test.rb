# frozen_string_literal: true

require "test_helper"
require_relative "../support/test_shards"

# The split of the suite over processes (rake test:ruby, test:asan): every
# file once, the same split every time (a failure replays by its shard
# number), the files that share a resource in one process, and shards
# within one heavy file of each other.
class TestShardsTest < Minitest::Test
  FILES = Dir[File.expand_path("../**/*_test.rb", __dir__)].map { |f| f.delete_prefix("#{File.expand_path("../..", __dir__)}/") }

  def test_every_file_once_and_the_same_split_every_time
    [1, 2, 3].each do |count|
      shards = TestShards.split(FILES.shuffle, count)
      assert_equal count, shards.size
      assert_equal FILES.sort, shards.flatten.sort
      assert_equal shards, TestShards.split(FILES.reverse, count), "the order of the input changes nothing"
    end
  end

  def test_files_sharing_a_resource_share_a_process
    shards = TestShards.split(FILES, 2)
    %w[test/rails/ test/viewers/].each do |prefix|
      holding = shards.select { |s| s.any? { |f| f.start_with?(prefix) } }
      assert_equal 1, holding.size, "#{prefix} split over processes"
    end
    assert_includes shards.find { |s| s.include?("test/rails/push_cluster_test.rb") }, "test/hostile/proxy_guard_test.rb"
  end

  def test_shards_are_balanced
    loads = TestShards.split(FILES, 2).map { |s| TestShards.seconds(s) }
    heaviest_file = TestShards::SECONDS.values.max
    assert_operator (loads.max - loads.min), :<=, heaviest_file, loads.inspect
  end

  def test_shard_spec
    assert_equal [2, 3], TestShards.shard_spec("2/3")
    assert_nil TestShards.shard_spec(nil)
    %w[0/2 3/2 x 1/ /2].each do |bad|
      assert_raises(ArgumentError, bad) { TestShards.shard_spec(bad) }
    end
  end
end
