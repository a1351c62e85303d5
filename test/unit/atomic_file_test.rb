# frozen_string_literal: true

require "test_helper"
require "minitest/mock"
require "zlib"

class AtomicFileTest < Minitest::Test
  def setup
    @dir = Dir.mktmpdir("fathom-atomic")
  end

  def teardown
    FileUtils.rm_rf(@dir)
  end

  def test_writes_binary_data_and_returns_the_absolute_path
    data = (0..255).map(&:chr).join.b * 3
    path = Fathom::Files::AtomicFile.write(File.join(@dir, "p.pb.gz"), data)
    assert_equal File.join(@dir, "p.pb.gz"), path
    assert_equal data, File.binread(path)
    assert_equal [File.basename(path)], Dir.children(@dir)
  end

  # Rails sets Encoding.default_internal to UTF-8; the bytes must still be
  # written as they are (issue 23: Encoding::UndefinedConversionError and no
  # file). In a child, so this process's encodings stay as they are; the
  # child also writes a real profile that go tool pprof must read.
  def test_writes_bytes_unchanged_with_encoding_default_internal_set
    out = File.join(@dir, "rails.pb.gz")
    raw = File.join(@dir, "raw.bin")
    script = <<~RUBY
      Encoding.default_internal = "UTF-8"
      require "fathom"
      Fathom::Files::AtomicFile.write(#{raw.dump}, (0..255).map(&:chr).join.b)
      Fathom.profile(mode: :cpu, out: #{out.dump}) { 1 }
    RUBY
    _o, err, status = Open3.capture3(TestHelper::PLAIN_ENV, RbConfig.ruby, "-I", TestHelper::LIB, "-e", script)
    assert status.success?, err
    assert_equal (0..255).map(&:chr).join.b, File.binread(raw)
    if TestHelper.tool_available?("go")
      top, perr, pstatus = Open3.capture3("go", "tool", "pprof", "-top", out)
      assert pstatus.success?, perr
      assert_match(/Type: cpu/, top)
    end
  end

  def test_creates_parent_directories
    path = File.join(@dir, "a/b/c/p.pb.gz")
    Fathom::Files::AtomicFile.write(path, "x")
    assert_equal "x", File.read(path)
  end

  # A file Fathom did not write is replaced only when asked (overwrite: true).
  def test_replaces_existing_file_when_told_to
    path = File.join(@dir, "p")
    File.write(path, "old content that is longer")
    Fathom::Files::AtomicFile.write(path, "new", overwrite: true)
    assert_equal "new", File.read(path)
    assert_equal ["p"], Dir.children(@dir)
  end

  def test_refuses_a_file_fathom_did_not_write
    path = File.join(@dir, "script.rb")
    File.write(path, "puts 1")
    error = assert_raises(Fathom::Error) { Fathom::Files::AtomicFile.write(path, "gzip data") }
    assert_match(/script.rb exists and Fathom did not write it; refusing to overwrite it/, error.message)
    assert_equal "puts 1", File.read(path)
    assert_equal ["script.rb"], Dir.children(@dir)
  end

  def test_replaces_files_fathom_wrote
    gz = File.join(@dir, "heap.pb.gz")
    File.binwrite(gz, gzip_with_comment("old", "fathom"))
    Fathom::Files::AtomicFile.write(gz, "new")
    assert_equal "new", File.read(gz)

    json = File.join(@dir, "gc.json")
    File.write(json, '{"meta":{"version":24,"product":"Fathom GC profile (pid 1)"}}')
    Fathom::Files::AtomicFile.write(json, "new")
    assert_equal "new", File.read(json)

    other = File.join(@dir, "other.gz")
    File.binwrite(other, gzip_with_comment("x", "someone else"))
    assert_raises(Fathom::Error) { Fathom::Files::AtomicFile.write(other, "new") }
  end

  def test_a_real_profile_is_recognized_as_fathoms
    require_native!
    path = File.join(@dir, "gc.pb.gz")
    Fathom::GcProfiler.new.profile { GC.start }.write(path)
    assert Fathom::Files::AtomicFile.written_by_fathom?(path)
  end

  def test_never_replaces_links_devices_or_fifos
    target = File.join(@dir, "real")
    File.write(target, "keep")
    link = File.join(@dir, "link")
    File.symlink(target, link)
    assert_match(/is a symbolic link/, assert_raises(Fathom::Error) { Fathom::Files::AtomicFile.write(link, "x", overwrite: true) }.message)
    assert File.symlink?(link)
    assert_equal "keep", File.read(target)

    assert_match(/is a device, not a regular file/, assert_raises(Fathom::Error) { Fathom::Files::AtomicFile.write("/dev/null", "x", overwrite: true) }.message)
    assert File.chardev?("/dev/null")

    fifo = File.join(@dir, "fifo")
    File.mkfifo(fifo)
    assert_match(/is a FIFO/, assert_raises(Fathom::Error) { Fathom::Files::AtomicFile.write(fifo, "x", overwrite: true) }.message)
    assert File.pipe?(fifo)
  end

  def test_refuses_a_directory_it_cannot_create
    blocker = File.join(@dir, "file")
    File.write(blocker, "x")
    error = assert_raises(Fathom::Error) { Fathom::Files::AtomicFile.check_target!(File.join(blocker, "sub", "p.pb.gz")) }
    assert_match(/is not a directory/, error.message)
  end

  # A temp file left behind is one nobody holds the lock of and nobody
  # wrote for STALE_AFTER; the pid in its name decides nothing (issue 40,
  # item 9: another pid namespace's live writer has a pid that is dead, or
  # someone else's, here). The holder below stands for that writer: a
  # process whose pid is not in the name.
  def test_removes_only_temp_files_nobody_holds_and_nobody_wrote_lately
    long_ago = Time.now - Fathom::Files::AtomicFile::STALE_AFTER - 60
    temp = ->(tag) { File.join(@dir, ".#{tag}.pb.gz.#{Process.pid}.0123abcd#{Fathom::Files::AtomicFile::TMP_SUFFIX}") }
    abandoned, young, held = %w[abandoned young held].map(&temp)
    [abandoned, young, held].each { |path| File.write(path, "half") }
    [abandoned, held].each { |path| File.utime(long_ago, long_ago, path) }
    reader, writer = IO.pipe
    holder = spawn(RbConfig.ruby, "-e", "f = File.open(ARGV[0]); f.flock(File::LOCK_EX); puts :held; $stdout.flush; sleep",
                   held, out: writer)
    writer.close
    assert_equal "held\n", reader.gets

    Fathom::Files::AtomicFile.write(File.join(@dir, "r.pb.gz"), "x")
    refute File.exist?(abandoned), "an abandoned temp file was left"
    assert File.exist?(held), "a temp file whose writer holds its lock was removed"
    assert File.exist?(young), "a temp file written a moment ago (its writer may not have locked it yet) was removed"

    Process.kill("KILL", holder)
    Process.wait(holder)
    holder = nil
    File.utime(long_ago, long_ago, young)
    Fathom::Files::AtomicFile.write(File.join(@dir, "s.pb.gz"), "x")
    assert_equal %w[r.pb.gz s.pb.gz], Dir.children(@dir).sort, "once their writers are gone, both are removed"
  ensure
    reader&.close
    if holder
      Process.kill("KILL", holder)
      Process.wait(holder)
    end
  end

  # Both writers (Ruby's and the native one) hold a temp file's lock until
  # its name is gone. A cleanup runs all the while in another process, and
  # back-dates every temp file it sees locked (in /proc/locks, which takes
  # no lock itself), so that only the lock protects it from then on: a
  # writer that let go of the lock before its temp name was gone lost its
  # file (Ruby's writer made to close its lock with its file, before the
  # link: ENOENT within 60 writes in 6 runs of 6).
  def test_a_cleanup_never_removes_a_file_being_written
    skip "no /proc/locks" unless File.readable?("/proc/locks")
    skip "fork" unless Process.respond_to?(:fork)

    reader, writer = IO.pipe
    cleaner = fork do
      reader.close
      long_ago = Time.now - Fathom::Files::AtomicFile::STALE_AFTER - 60
      backdated = 0
      stop = false
      trap("TERM") { stop = true }
      until stop
        locked = File.read("/proc/locks").scan(/\bFLOCK\b.*?:(\d+) /).flatten.map(&:to_i)
        Dir.children(@dir).grep(/fathom-tmp\z/).each do |name|
          path = File.join(@dir, name)
          next unless locked.include?(File.stat(path).ino)

          File.utime(long_ago, long_ago, path)
          backdated += 1
        rescue SystemCallError
          nil
        end
        Fathom::Files::AtomicFile.remove_stale_temps(@dir)
      end
      writer.puts backdated
      exit!(0)
    end
    writer.close
    data = "x" * (1 << 20)
    60.times do |i|
      assert_equal data.bytesize, File.size(Fathom::Files::AtomicFile.write(File.join(@dir, "p#{i}.pb.gz"), data))
      assert_equal data.bytesize, File.size(Fathom::Files::AtomicFile.write_new(File.join(@dir, "q#{i}.pb.gz"), data))
    end
    Process.kill("TERM", cleaner)
    Process.wait(cleaner)
    cleaner = nil
    # 0 would mean the cleanup never caught a writer: the test proved nothing.
    assert_operator reader.read.to_i, :>, 0
  ensure
    if cleaner
      Process.kill("KILL", cleaner)
      Process.wait(cleaner)
    end
    reader&.close
  end

  # File names are bytes: a temp file whose name is not valid UTF-8 (the
  # program chose the output name) is still recognized and removed, and a
  # path that cannot be written gives Fathom::Error, not "invalid byte
  # sequence" from the message's clean-up (found by the option fuzzer).
  def test_names_that_are_not_utf8
    dead = spawn("true")
    Process.wait(dead)
    long_ago = Time.now - Fathom::Files::AtomicFile::STALE_AFTER - 60
    stale = File.join(@dir, ".\xFF.pb.gz.#{dead}.0123abcd#{Fathom::Files::AtomicFile::TMP_SUFFIX}".dup.force_encoding("UTF-8"))
    File.write(stale, "half")
    File.utime(long_ago, long_ago, stale)
    Fathom::Files::AtomicFile.write(File.join(@dir, "\xFEr.pb.gz".dup.force_encoding("UTF-8")), "x")
    refute File.exist?(stale), "a dead writer's temp file with a binary name was left"

    # Directories whose names hold glob characters or bytes that are not
    # UTF-8: Dir.glob read "[" as a pattern (the temp file stayed) or raised
    # ArgumentError (found by the option fuzzer, seed 1735203948).
    ["a[b", "c{d,e}", "\xB4[\xD0".dup.force_encoding("UTF-8")].each do |name|
      dir = File.join(@dir, name)
      Dir.mkdir(dir)
      stale = File.join(dir, ".p.pb.gz.#{dead}.0123abcd#{Fathom::Files::AtomicFile::TMP_SUFFIX}")
      File.write(stale, "half")
      File.utime(long_ago, long_ago, stale)
      Fathom::Files::AtomicFile.write(File.join(dir, "r.pb.gz"), "x")
      refute File.exist?(stale), "a dead writer's temp file in #{name.inspect} was left"
      assert_equal "x", File.binread(File.join(dir, "r.pb.gz"))
    end

    too_long = File.join(@dir, "\xFF".dup.force_encoding("UTF-8") * 300, "p.pb.gz")
    error = assert_raises(Fathom::Error) { Fathom::Files::AtomicFile.write(too_long, "x") }
    assert_match(/\Afathom: cannot write .*File name too long/m, error.message.scrub)
  end

  # A profile holds memory contents: only its owner reads it, whatever the umask.
  def test_files_are_created_0600
    path = Fathom::Files::AtomicFile.write(File.join(@dir, "p"), "x")
    assert_equal 0o600, File.stat(path).mode & 0o777
  end

  def test_removes_temp_file_when_the_write_fails
    data = Object.new
    def data.to_s
      raise IOError, "disk on fire"
    end
    path = File.join(@dir, "p")
    File.write(path, "old")
    assert_raises(IOError) { Fathom::Files::AtomicFile.write(path, data, overwrite: true) }
    assert_equal ["p"], Dir.children(@dir), "temp file left behind"
    assert_equal "old", File.read(path), "destination changed by a failed write"
  end

  # Thread#kill raises nothing in the killed thread: only an ensure runs.
  # The write blocks in data.to_s with its temp file open; once the file is
  # there, the thread is killed (deterministic: the kill comes after the
  # temp file exists and before anything is renamed).
  def test_removes_temp_file_when_the_writer_is_killed
    data = Object.new
    def data.to_s
      sleep
    end
    path = File.join(@dir, "p")
    writer = Thread.new { Fathom::Files::AtomicFile.write(path, data) }
    Thread.pass until Dir.children(@dir).any? { |n| n.end_with?(Fathom::Files::AtomicFile::TMP_SUFFIX) } || !writer.alive?
    sleep 0.01 until writer.status == "sleep" || !writer.alive?
    writer.kill.join
    assert_equal [], Dir.children(@dir), "temp file left behind by a killed writer"
  end

  # (A directory as the target used to make the rename fail; it is now
  # refused before anything is written, so the failure is simulated.)
  def test_removes_temp_file_when_the_rename_fails
    target = File.join(@dir, "target")
    File.stub(:link, ->(*) { raise Errno::EXDEV }) do
      File.stub(:rename, ->(*) { raise Errno::EACCES }) do
        assert_raises(Errno::EACCES) { Fathom::Files::AtomicFile.write(target, "data") }
      end
    end
    assert_equal [], Dir.children(@dir)
  end

  def test_concurrent_writers_never_expose_partial_files
    path = File.join(@dir, "p")
    contents = [("a" * 200_000), ("b" * 300_000)]
    Fathom::Files::AtomicFile.write(path, contents[0])
    writers = contents.map { |c| Thread.new { 20.times { Fathom::Files::AtomicFile.write(path, c, overwrite: true) } } }
    reads = 0
    while writers.any?(&:alive?)
      assert_includes contents, File.binread(path)
      reads += 1
    end
    writers.each(&:join)
    assert_operator reads, :>, 0
    assert_equal ["p"], Dir.children(@dir)
  end

  private

  def gzip_with_comment(data, comment)
    io = StringIO.new(+"")
    gz = Zlib::GzipWriter.new(io)
    gz.comment = comment
    gz.write(data)
    gz.close
    io.string
  end
end
