# frozen_string_literal: true

require "test_helper"

# Issue 10, items 9 and 11: PeriodicFlusher options that were accepted and
# then failed every flush (or killed the thread) are refused up front, with
# an ArgumentError/TypeError naming the option; the default file name
# matches what the profiler writes.
class FlusherOptionsTest < Minitest::Test
  class FakeProfiler
    def flush(gc: false) = Fathom::Profile.new("x".b, {})
  end

  def setup
    @dir = Dir.mktmpdir("fathom-flusher-options")
  end

  def teardown
    FileUtils.rm_rf(@dir)
  end

  def flusher(**opts)
    Fathom::PeriodicFlusher.new(FakeProfiler.new, dir: @dir, **opts)
  end

  def assert_refused(option, error = ArgumentError, **opts)
    e = assert_raises(error, "#{opts.inspect} must be refused") { flusher(**opts) }
    assert_match(/\Afathom: #{option}\b/, e.message)
    e
  end

  def test_interval_outside_1ms_to_24h
    e = assert_refused("interval", interval: 2**70)
    assert_match(/between 1ms and 86400s/, e.message)
    assert_refused("interval", interval: 86_401)
    assert_refused("interval", interval: "0.5ms")
    assert_refused("interval", TypeError, interval: nil)
    assert_equal 86_400.0, flusher(interval: 86_400).interval
    assert_equal 0.001, flusher(interval: "1ms").interval
  end

  def test_patterns_that_are_no_file_name
    [".", "..", "", "a/b", "%{pid}/x", "heap\0.pb.gz", "x" * 250].each do |pattern|
      assert_refused("pattern", pattern: pattern)
    end
  end

  def test_patterns_with_directives_fathom_does_not_fill
    ["%d", "%s.pb.gz", "%{host}.pb.gz", "100%.pb.gz", "%<pid>d.pb.gz"].each do |pattern|
      e = assert_refused("pattern", pattern: pattern)
      assert_match(/%\{pid\}, %\{token\}, %\{time\}, %\{index\}/, e.message)
    end
    assert_refused("pattern", pattern: "\xff%{index}".b.force_encoding("UTF-8"))
    assert_refused("pattern", TypeError, pattern: :heap)
    assert_equal "p-%%-%{index}.pb.gz", flusher(pattern: "p-%%-%{index}.pb.gz").pattern
  end

  def test_pattern_must_not_look_like_a_temporary_file
    assert_refused("pattern", pattern: ".x.%{pid}.fathom-tmp")
  end

  def test_dir_that_cannot_be_a_directory
    file = File.join(@dir, "file")
    File.write(file, "")
    assert_refused("dir", dir: file)
    assert_refused("dir", dir: File.join(file, "sub"))
    assert_refused("dir", dir: "a\0b")
    assert_refused("dir", dir: "")
    assert_refused("dir", dir: "~no-such-user-fathom/x")
    assert_refused("dir", TypeError, dir: 42)
  end

  def test_default_file_name_follows_the_format
    require_native!
    assert_match(/\Aheap-%\{pid\}.*\.pb\.gz\z/, Fathom::PeriodicFlusher.new(FakeProfiler.new, dir: @dir).pattern)
    gc = Fathom::GcProfiler.new(format: :firefox)
    f = Fathom::PeriodicFlusher.new(gc, dir: @dir, interval: 60)
    assert_equal "gc-%{pid}-%{token}-%{time}-%{index}.json.gz", f.pattern
    gc.start
    f.start
    path = f.stop
    gc.stop
    assert_match(/\/gc-\d+-\h{8}-\d{8}T\d{6}Z-\d+\.json\.gz\z/, path)
    assert_equal :firefox, Fathom::Profile.load(path).format
    assert_match(/\.pb\.gz\z/, Fathom::PeriodicFlusher.new(Fathom::GcProfiler.new, dir: @dir).pattern)
  end
end
