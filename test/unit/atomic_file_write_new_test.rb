# frozen_string_literal: true

require "test_helper"

# Files::AtomicFile.write_new: the flusher's one-call native write, and its
# fallback to Files::AtomicFile.write (with every check) for anything unusual.
class AtomicFileWriteNewTest < Minitest::Test
  def setup
    require_native!
    @dir = Dir.mktmpdir("fathom-write-new")
  end

  def teardown
    FileUtils.rm_rf(@dir)
  end

  def test_writes_a_new_file_and_leaves_no_temporary_file
    data = (0..255).map(&:chr).join.b * 100
    path = Fathom::Files::AtomicFile.write_new(File.join(@dir, "p.pb.gz"), data)
    assert_equal File.join(@dir, "p.pb.gz"), path
    assert_equal data, File.binread(path)
    assert_equal ["p.pb.gz"], Dir.children(@dir)
  end

  def test_an_existing_foreign_file_is_refused_by_the_checks_of_write
    path = File.join(@dir, "theirs.pb.gz")
    File.write(path, "keep")
    assert_raises(Fathom::Error) { Fathom::Files::AtomicFile.write_new(path, "x") }
    assert_equal "keep", File.read(path)
    assert_equal ["theirs.pb.gz"], Dir.children(@dir)
  end

  def test_a_link_at_the_name_is_refused
    File.symlink(File.join(@dir, "elsewhere"), File.join(@dir, "l.pb.gz"))
    assert_raises(Fathom::Error) { Fathom::Files::AtomicFile.write_new(File.join(@dir, "l.pb.gz"), "x") }
    refute File.exist?(File.join(@dir, "elsewhere"))
  end

  def test_a_file_fathom_wrote_is_replaced
    path = File.join(@dir, "rotating.pb.gz")
    Fathom::Files::AtomicFile.write_new(path, "first")
    File.binwrite(path, "\x1f\x8b\x08\x10\x00\x00\x00\x00\x00\x03fathom\x00".b) # gzip header, comment "fathom"
    Fathom::Files::AtomicFile.write_new(path, "second")
    assert_equal "second", File.read(path)
  end

  def test_a_missing_directory_is_created
    path = File.join(@dir, "a/b/p.pb.gz")
    Fathom::Files::AtomicFile.write_new(path, "x")
    assert_equal "x", File.read(path)
  end

  def test_a_directory_that_is_a_file_is_explained_by_write
    file = File.join(@dir, "file")
    File.write(file, "")
    e = assert_raises(Fathom::Error) { Fathom::Files::AtomicFile.write_new(File.join(file, "p.pb.gz"), "x") }
    assert_match(/is not a directory/, e.message)
  end

  # Two containers with the same pid sharing a volume picked the same name:
  # the second write replaced the first one's file (a Fathom file).
  def test_replace_false_never_replaces_even_a_fathom_file
    path = File.join(@dir, "heap-1-20261126T101500Z-1.pb.gz")
    theirs = "\x1f\x8b\x08\x10\x00\x00\x00\x00\x00\x03fathom\x00theirs".b
    File.binwrite(path, theirs)
    assert_nil Fathom::Files::AtomicFile.write_new(path, "mine", replace: false)
    assert_equal theirs, File.binread(path)
    assert_equal [File.basename(path)], Dir.children(@dir), "no temporary file left"
    assert_nil Fathom::Files::AtomicFile.write(path, "mine", replace: false), "the Ruby path neither"
    assert_equal theirs, File.binread(path)
  end

  def test_new_files_are_0600_and_new_directories_0700_whatever_the_umask
    old = File.umask(0o022)
    path = Fathom::Files::AtomicFile.write_new(File.join(@dir, "a/b/p.pb.gz"), "x")
    assert_equal 0o600, File.stat(path).mode & 0o777
    assert_equal 0o700, File.stat(File.join(@dir, "a")).mode & 0o777
    assert_equal 0o700, File.stat(File.join(@dir, "a/b")).mode & 0o777
  ensure
    File.umask(old) if old
  end
end
