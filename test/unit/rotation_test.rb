# frozen_string_literal: true

require "test_helper"
require "fathom/always_on/rotation"

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
    Fathom::AtomicFile.write(path, TestHelper.gzip(Random.bytes(size), fathom: true))
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
  # keep_files: 1 means one file, also with two modes writing (one process
  # heap,gc FATHOM_KEEP=1 ended with 2).
  def test_write_new_makes_room_first_and_never_exceeds_the_bound
    paths = (1..3).map { |i| fathom_file("heap-1-20261126T101500Z-#{i}.pb.gz", 10, 100 - i) }
    rotation = Fathom::Rotation.new(@dir, keep_files: 1, keep_bytes: 1 << 30)
    data = TestHelper.gzip("x", fathom: true)
    new_path = File.join(@dir, "gc-1-0123abcd-20261126T101501Z-4.pb.gz")
    assert_equal new_path, rotation.write_new(new_path, data)
    assert_equal [new_path], rotation.ours.map(&:first)
    paths.each { |p| refute File.exist?(p) }
    assert_equal 0o600, File.stat(File.join(@dir, ".fathom.lock")).mode & 0o777
  end

  def test_write_new_never_replaces
    path = fathom_file("heap-1-0123abcd-20261126T101500Z-1.pb.gz", 10, 10)
    before = File.binread(path)
    rotation = Fathom::Rotation.new(@dir, keep_files: 1, keep_bytes: 1 << 30)
    assert_nil rotation.write_new(path, TestHelper.gzip("other", fathom: true))
    assert_equal before, File.binread(path)
  end

  # The names Fathom writes: old always-on names, with the token, and the
  # middleware's request-<kind>-... files; temp files and the lock are not profiles.
  def test_recognises_every_name_fathom_writes
    %w[heap-1-20261126T101500Z-1.pb.gz gc-12-0123abcd-20261126T101500Z-2.json.gz
       request-heap-7-20261126T101500Z-3.pb.gz request-cpu-7-89abcdef-20261126T101500Z-4.pb.gz].each do |name|
      assert_match Fathom::Rotation::NAME, name
    end
    [".heap-1-20261126T101500Z-1.pb.gz.1.ab.fathom-tmp", ".fathom.lock", "heap-1-xyz-20261126T101500Z-1.pb.gz",
     "notes.txt"].each { |name| refute_match Fathom::Rotation::NAME, name }
  end
end
