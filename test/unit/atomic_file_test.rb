# frozen_string_literal: true

require "test_helper"

class AtomicFileTest < Minitest::Test
  def setup
    @dir = Dir.mktmpdir("fathom-atomic")
  end

  def teardown
    FileUtils.rm_rf(@dir)
  end

  def test_writes_binary_data_and_returns_the_absolute_path
    data = (0..255).map(&:chr).join.b * 3
    path = Fathom::AtomicFile.write(File.join(@dir, "p.pb.gz"), data)
    assert_equal File.join(@dir, "p.pb.gz"), path
    assert_equal data, File.binread(path)
    assert_equal [File.basename(path)], Dir.children(@dir)
  end

  def test_creates_parent_directories
    path = File.join(@dir, "a/b/c/p.pb.gz")
    Fathom::AtomicFile.write(path, "x")
    assert_equal "x", File.read(path)
  end

  def test_replaces_existing_file
    path = File.join(@dir, "p")
    File.write(path, "old content that is longer")
    Fathom::AtomicFile.write(path, "new")
    assert_equal "new", File.read(path)
    assert_equal ["p"], Dir.children(@dir)
  end

  def test_permissions_follow_umask
    path = Fathom::AtomicFile.write(File.join(@dir, "p"), "x")
    assert_equal 0o666 & ~File.umask, File.stat(path).mode & 0o777
  end

  def test_removes_temp_file_when_the_write_fails
    data = Object.new
    def data.to_s
      raise IOError, "disk on fire"
    end
    path = File.join(@dir, "p")
    File.write(path, "old")
    assert_raises(IOError) { Fathom::AtomicFile.write(path, data) }
    assert_equal ["p"], Dir.children(@dir), "temp file left behind"
    assert_equal "old", File.read(path), "destination changed by a failed write"
  end

  def test_removes_temp_file_when_the_rename_fails
    target = File.join(@dir, "target")
    Dir.mkdir(target)
    File.write(File.join(target, "keep"), "x") # a non-empty directory cannot be replaced
    assert_raises(SystemCallError) { Fathom::AtomicFile.write(target, "data") }
    assert_equal ["target"], Dir.children(@dir)
  end

  def test_concurrent_writers_never_expose_partial_files
    path = File.join(@dir, "p")
    contents = [("a" * 200_000), ("b" * 300_000)]
    Fathom::AtomicFile.write(path, contents[0])
    writers = contents.map { |c| Thread.new { 20.times { Fathom::AtomicFile.write(path, c) } } }
    reads = 0
    while writers.any?(&:alive?)
      assert_includes contents, File.binread(path)
      reads += 1
    end
    writers.each(&:join)
    assert_operator reads, :>, 0
    assert_equal ["p"], Dir.children(@dir)
  end
end
