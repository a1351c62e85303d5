# frozen_string_literal: true

require "test_helper"
require "fathom/pprof/edit"

class PprofEditTest < Minitest::Test
  def profile
    skip_unless_protoc!
    p = TextProfile.new
    p.sample(%w[String#* Foo#bar], [1, 100, 1, 100])
    p.comments = ["first"]
    p.default_sample_type = "inuse_space"
    p.time_nanos = 1_700_000_000_000_000_000
    p.duration_nanos = 2_000_000_000
    p.gzipped
  end

  def test_adds_comments_after_the_existing_ones_and_switches_the_default
    edited = Fathom::Pprof::Edit.apply(profile, comments: ["pid=1", "hostname=h"], default_sample_type: "alloc_space")
    decoded = Fathom::Pprof.read(edited)
    assert_equal ["first", "pid=1", "hostname=h"], decoded.comments
    assert_equal "alloc_space", decoded.default_sample_type
    assert_equal [[%w[String#* Foo#bar], [1, 100, 1, 100]]], decoded.samples.map { |s| [decoded.stack_names(s), s.values] }
    assert_equal "fathom", Fathom::AtomicFile.gzip_comment(edited)
    assert_equal [1_700_000_000_000_000_000, 2_000_000_000], Fathom::Pprof::Edit.time_window(edited)
    # Twice: the default is replaced, not repeated.
    again = Fathom::Pprof.read(Fathom::Pprof::Edit.apply(edited, default_sample_type: "inuse_objects"))
    assert_equal "inuse_objects", again.default_sample_type
    assert_equal decoded.comments, again.comments
  end

  # The edit runs in a server under load (every Rack reply, every
  # always-on file): Ruby objects that live until it ends grow the server's
  # Ruby heap for good. A Struct per top-level field and an Array per varint
  # came to ~40k live and 1.4M allocated objects for one retention profile,
  # and puma's heap went from 221 to 319 pages at the first retention
  # fetch. Now the count does not depend on the profile's size.
  def test_allocates_a_few_objects_whatever_the_profile_size
    skip_unless_protoc!
    p = TextProfile.new
    3000.times { |i| p.sample(["leaf#{i}", "mid#{i % 50}", "main"], [1, 100 + i, 1, 100 + i]) }
    big = p.gzipped
    GC.disable
    before = GC.stat(:total_allocated_objects)
    edited = Fathom::Pprof::Edit.apply(big, comments: ["pid=1"], default_sample_type: "alloc_space")
    window = Fathom::Pprof::Edit.time_window(edited)
    allocated = GC.stat(:total_allocated_objects) - before
    GC.enable
    assert_operator allocated, :<, 200, "objects allocated editing a profile of ~9000 top-level fields"
    assert_equal [0, 0], window
    decoded = Fathom::Pprof.read(edited)
    assert_equal "alloc_space", decoded.default_sample_type
    assert_equal 3000, decoded.samples.size
  ensure
    GC.enable
  end

  def test_refuses_a_sample_type_the_profile_does_not_have
    error = assert_raises(ArgumentError) { Fathom::Pprof::Edit.apply(profile, default_sample_type: "first") }
    assert_match(/no sample type "first"/, error.message)
  end

  def test_window_comment_from_the_profile_times
    require "fathom/always_on/process_comments"
    lines = Fathom::ProcessComments.lines(profile)
    assert_includes lines, "window=2023-11-14T22:13:20.000Z/2023-11-14T22:13:22.000Z"
    assert_includes lines, "pid=#{Process.pid}"
  end
end
