# frozen_string_literal: true

require "test_helper"
require "fathom/files/rotation"

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
    Fathom::Files::AtomicFile.write(path, TestHelper.gzip(Random.bytes(size), fathom: true))
    File.utime(Time.now - age, Time.now - age, path)
    path
  end

  def test_keeps_the_newest_n_files
    paths = (1..5).map { |i| fathom_file("heap-1-20261126T101500Z-#{i}.pb.gz", 10, 100 - i) }
    rotation = Fathom::Files::Rotation.new(@dir, keep_files: 3, keep_bytes: 1 << 30)
    assert_equal paths.first(3), rotation.make_room(10)  # room for one more: 2 stay
    assert_equal paths.last(2), rotation.ours.map(&:first)
  end

  def test_keeps_under_n_bytes
    paths = (1..4).map { |i| fathom_file("gc-1-20261126T101500Z-#{i}.pb.gz", 1000, 100 - i) }
    size = File.size(paths.first)
    rotation = Fathom::Files::Rotation.new(@dir, keep_files: 100, keep_bytes: size * 3)
    assert_equal paths.first(2), rotation.make_room(size)
    assert_operator rotation.ours.sum { |_, s, _| s } + size, :<=, size * 3
  end

  def test_never_touches_files_fathom_did_not_create
    File.write(mine = File.join(@dir, "heap-1-20261126T101500Z-1.pb.gz"), "not Fathom's")
    File.write(other = File.join(@dir, "notes.txt"), "x")
    fathom_file("heap-1-20261126T101500Z-2.pb.gz", 10, 50)
    rotation = Fathom::Files::Rotation.new(@dir, keep_files: 1, keep_bytes: 1)
    rotation.make_room(10)
    assert File.exist?(mine)
    assert File.exist?(other)
    assert_empty rotation.ours
  end
end

class RotationTest
  # keep_files: 1 means one file per series (process and mode), at every
  # moment: a new file of a series replaces that series' oldest.
  def test_write_new_makes_room_first_and_never_exceeds_the_bound
    paths = (1..3).map { |i| fathom_file("heap-1-0123abcd-20261126T101500Z-#{i}.pb.gz", 10, 100 - i) }
    other = fathom_file("gc-1-0123abcd-20261126T101500Z-9.pb.gz", 10, 200)
    rotation = Fathom::Files::Rotation.new(@dir, keep_files: 1, keep_bytes: 1 << 30)
    data = TestHelper.gzip("x", fathom: true)
    new_path = File.join(@dir, "heap-1-0123abcd-20261126T101501Z-4.pb.gz")
    assert_equal new_path, rotation.write_new(new_path, data)
    assert_equal [other, new_path], rotation.ours.map(&:first), "the gc series keeps its file, older as it is"
    paths.each { |p| refute File.exist?(p) }
    assert_equal 0o600, File.stat(File.join(@dir, ".fathom.lock")).mode & 0o777
  end

  # FATHOM_KEEP counts per process and mode: 4 processes x 2 modes with
  # keep_files 2 keep 2 files of each, 16 in all; keep_bytes bounds the
  # directory as a whole, the oldest (an exited process's) going first.
  def test_keep_files_counts_each_process_and_mode_keep_bytes_the_directory
    rotation = Fathom::Files::Rotation.new(@dir, keep_files: 2, keep_bytes: 1 << 30)
    data = TestHelper.gzip("x", fathom: true)
    5.times do |round|
      (1..4).each do |pid|
        %w[cpu heap].each do |mode|
          path = File.join(@dir, format("%s-%d-%08x-20261126T1015%02dZ-%d.pb.gz", mode, pid, pid, round, round))
          assert rotation.write_new(path, data)
          File.utime(Time.now - 100 + round, Time.now - 100 + round, path) # oldest first, by round
        end
      end
    end
    names = rotation.ours.map { |p, _, _| File.basename(p) }
    assert_equal 16, names.size, names.inspect
    assert_equal 8, names.group_by { |n| Fathom::Files::Rotation.series(n) }.size
    assert names.all? { |n| n[/Z-(\d+)\./, 1].to_i >= 3 }, "each series keeps its newest two: #{names}"

    size = File.size(rotation.ours.first.first)
    tight = Fathom::Files::Rotation.new(@dir, keep_files: 2, keep_bytes: size * 9)
    path = File.join(@dir, "wall-9-0000abcd-20261126T101600Z-1.pb.gz")
    assert tight.write_new(path, data)
    left = tight.ours.map(&:first)
    assert_equal 9, left.size
    assert_equal path, left.last
    assert left.none? { |p| p.include?("Z-3.") }, "the oldest round went first, whatever its series"
  end

  def test_series_of_a_name
    assert_equal "heap-1-0123abcd-", Fathom::Files::Rotation.series("/d/heap-1-0123abcd-20261126T101500Z-1.pb.gz")
    assert_equal "request-cpu-7-", Fathom::Files::Rotation.series("request-cpu-7-20261126T101500Z-4.pb.gz")
    assert_nil Fathom::Files::Rotation.series("notes-1-20261126T101500Z-1.pb.gz")
  end

  def test_write_new_never_replaces
    path = fathom_file("heap-1-0123abcd-20261126T101500Z-1.pb.gz", 10, 10)
    before = File.binread(path)
    rotation = Fathom::Files::Rotation.new(@dir, keep_files: 1, keep_bytes: 1 << 30)
    assert_nil rotation.write_new(path, TestHelper.gzip("other", fathom: true))
    assert_equal before, File.binread(path)
  end

  # The names Fathom writes: old always-on names, with the token, and the
  # middleware's request-<kind>-... files; temp files and the lock are not profiles.
  def test_recognises_every_name_fathom_writes
    %w[heap-1-20261126T101500Z-1.pb.gz gc-12-0123abcd-20261126T101500Z-2.json.gz
       request-heap-7-20261126T101500Z-3.pb.gz request-cpu-7-89abcdef-20261126T101500Z-4.pb.gz].each do |name|
      assert_match Fathom::Files::Rotation::NAME, name
    end
    [".heap-1-20261126T101500Z-1.pb.gz.1.ab.fathom-tmp", ".fathom.lock", "heap-1-xyz-20261126T101500Z-1.pb.gz",
     "notes.txt"].each { |name| refute_match Fathom::Files::Rotation::NAME, name }
  end
end
