# frozen_string_literal: true

require "test_helper"

class ProfileTest < Minitest::Test
  def setup
    @dir = Dir.mktmpdir("fathom-profile")
  end

  def teardown
    FileUtils.rm_rf(@dir)
  end

  def sample_profile
    skip_unless_protoc!
    t = TextProfile.new
    t.sample(%w[Foo#bar main], [2, 80, 1, 40], { "class" => "String" })
    Fathom::Profile.new(t.gzipped, { samples: 1, live_samples: 1, flush_ns: 1_500_000 })
  end

  def test_write_decode_report
    profile = sample_profile
    path = profile.write(File.join(@dir, "out/heap.pb.gz"))
    assert_equal File.join(@dir, "out/heap.pb.gz"), path
    assert_equal path, profile.path
    assert_equal profile.bytes, File.binread(path)
    assert_equal ["Foo#bar", "main"], profile.decode.stack_names(profile.decode.samples[0])
    assert_same profile.decode, profile.decode
    assert_match(/40B\s+100%\s+100%\s+40B\s+100%  Foo#bar/, profile.report)
    assert_match(/Type: alloc_space/, profile.report(sample_index: "alloc_space", top: 1))
  end

  def test_to_s
    profile = sample_profile
    assert_match(/\AFathom heap profile: \d+ bytes gzipped, 1 samples \(1 live\), flushed in 1.5ms\z/, profile.to_s)
    profile.write(File.join(@dir, "p.pb.gz"))
    assert_match(/written to #{Regexp.escape(@dir)}/, profile.to_s)
  end

  def test_load
    path = sample_profile.write(File.join(@dir, "p.pb.gz"))
    loaded = Fathom::Profile.load(path)
    assert_equal path, loaded.path
    assert_equal({}, loaded.stats)
    assert_equal 1, loaded.decode.samples.size
  end

  def test_bad_arguments
    assert_raises(TypeError) { Fathom::Profile.new(nil) }
    assert_raises(TypeError) { Fathom::Profile.new("x").write(nil) }
  end
end
