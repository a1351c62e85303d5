# frozen_string_literal: true

require "test_helper"
require "fathom/rotation"
require "fathom/pprof/edit"

class RotationTest < Minitest::Test
  def setup
    @dir = Dir.mktmpdir("fathom-rotation")
  end

  def teardown
    FileUtils.rm_rf(@dir)
  end

  # A file as Fathom writes it (gzip with the "fathom" header comment).
  def fathom_file(name, size, age)
    path = File.join(@dir, name)
    Fathom::AtomicFile.write(path, Fathom::Pprof::Edit.gzip(Random.bytes(size)))
    File.utime(Time.now - age, Time.now - age, path)
    path
  end

  def test_keeps_the_newest_n_files
    paths = (1..5).map { |i| fathom_file("heap-1-20261126T101500Z-#{i}.pb.gz", 10, 100 - i) }
    rotation = Fathom::Rotation.new(@dir, keep_files: 3, keep_bytes: 1 << 30)
    assert_equal paths.first(3), rotation.make_room(10)  # room for one more: 2 stay
    assert_equal paths.last(2), rotation.ours.map(&:first)
  end

  def test_keeps_under_n_bytes
    paths = (1..4).map { |i| fathom_file("gc-1-20261126T101500Z-#{i}.pb.gz", 1000, 100 - i) }
    size = File.size(paths.first)
    rotation = Fathom::Rotation.new(@dir, keep_files: 100, keep_bytes: size * 3)
    assert_equal paths.first(2), rotation.make_room(size)
    assert_operator rotation.ours.sum { |_, s, _| s } + size, :<=, size * 3
  end

  def test_never_touches_files_fathom_did_not_create
    File.write(mine = File.join(@dir, "heap-1-20261126T101500Z-1.pb.gz"), "not Fathom's")
    File.write(other = File.join(@dir, "notes.txt"), "x")
    fathom_file("heap-1-20261126T101500Z-2.pb.gz", 10, 50)
    rotation = Fathom::Rotation.new(@dir, keep_files: 1, keep_bytes: 1)
    rotation.make_room(10)
    assert File.exist?(mine)
    assert File.exist?(other)
    assert_empty rotation.ours
  end
end

class RotationTest
  def test_several_writers_leave_room_for_each_other
    paths = (1..6).map { |i| fathom_file("heap-1-20261126T101500Z-#{i}.pb.gz", 10, 100 - i) }
    rotation = Fathom::Rotation.new(@dir, keep_files: 4, keep_bytes: 1 << 30, writers: 2)
    assert_equal paths.first(4), rotation.make_room(10) # 2 left: room for both writers' next file
    rotation = Fathom::Rotation.new(@dir, keep_files: 1, keep_bytes: 1, writers: 2)
    rotation.make_room(10)
    assert_equal 1, rotation.ours.size, "the newest file stays whatever the bound"
  end
end
