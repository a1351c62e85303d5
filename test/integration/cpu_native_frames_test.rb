# frozen_string_literal: true

require "test_helper"
require "support/pprof_raw"

# native: true end to end (issue 12, "Native frames"): a real program in its
# own process under Fathom::CpuProfiler.new(native: true), the pprof read
# back by go tool pprof: libz's functions under Zlib::Deflate.deflate, the
# SHA256 function under its Digest frame, rb_hash_aref in a hash loop.
class CpuNativeFramesTest < Minitest::Test
  PROGRAM = <<~RUBY
    require "fathom"
    require "zlib"
    require "digest"
    def compress(data) = Zlib::Deflate.deflate(data)
    def digest(big) = Digest::SHA256.hexdigest(big)
    def lookups(hash, keys)
      total = 0
      120.times { keys.each { |k| total += hash[k] } }
      total
    end
    profiler = Fathom::CpuProfiler.new(mode: :cpu, interval: 0.001, native: true).start
    compress(Random.new(1).bytes(1 << 20) * 6)
    digest("x" * (24 << 20))
    keys = (1..10_000).map { |i| "key\#{i}" }
    lookups(keys.each_with_index.to_h, keys)
    profiler.stop
    File.binwrite(ARGV[0], profiler.flush.bytes)
  RUBY

  def setup
    require_native!
    skip "go tool pprof is not available" unless PprofRaw.go_available? || TestHelper.ci?
    @dir = Dir.mktmpdir("fathom-cpu-native")
  end

  def teardown
    FileUtils.rm_rf(@dir)
  end

  def profile
    @profile ||= begin
      script = File.join(@dir, "native.rb")
      out = File.join(@dir, "native.pb.gz")
      File.write(script, PROGRAM)
      _o, err, status = Open3.capture3(TestHelper::PLAIN_ENV, RbConfig.ruby, "-I", TestHelper::LIB, script, out)
      assert status.success?, "program failed: #{err}"
      PprofRaw.read(out)
    end
  end

  # Samples (leaf first) whose stack holds a function matching `pattern`.
  def samples_with(pattern)
    profile.samples.select { |s| s.functions.any? { |f| pattern === f } }
  end

  def below?(sample, inner, outer)
    i = sample.functions.index { |f| inner === f }
    o = sample.functions.index { |f| outer === f }
    i && o && i < o
  end

  def test_libz_frames_under_zlib_deflate
    zlib = samples_with("Zlib::Deflate.deflate")
    refute_empty zlib
    libz = zlib.select { |s| s.functions.include?("deflate") }
    assert_operator libz.sum { |s| s.values[profile.index_of("cpu")] },
                    :>=, zlib.sum { |s| s.values[profile.index_of("cpu")] } / 2,
                    "most of Zlib::Deflate.deflate's CPU time is in libz's deflate"
    samples_with("deflate").each { |s| assert below?(s, "deflate", "Zlib::Deflate.deflate"), s.functions.inspect }
  end

  def test_native_digest_function_under_its_ruby_frame
    sha = samples_with(/SHA256_(Update|Transform|Final)|sha256_block/i)
    refute_empty sha, "functions seen: #{profile.function_names.first(40)}"
    sha.each { |s| assert below?(s, /SHA256|sha256/i, /\ADigest::/), s.functions.inspect }
  end

  def test_fathom_run_native
    script = File.join(@dir, "zlib.rb")
    File.write(script, "require 'zlib'\nZlib::Deflate.deflate(Random.new(2).bytes(1 << 20) * 4)\n")
    out = File.join(@dir, "run.pb.gz")
    _o, err, status = TestHelper.run_fathom("run", "--mode", "cpu", "--native", "--interval", "1ms", "-o", out, "--",
                                            RbConfig.ruby, script, env: TestHelper::PLAIN_ENV)
    assert status.success?, err
    raw = PprofRaw.read(out)
    libz = raw.samples.select { |s| s.functions.include?("deflate") }
    refute_empty libz, "functions seen: #{raw.function_names.first(40)}"
    libz.each { |s| assert below?(s, "deflate", "Zlib::Deflate.deflate"), s.functions.inspect }
    _o, err, status = TestHelper.run_fathom("run", "--mode", "heap", "--native", "-o", File.join(@dir, "h.pb.gz"), "--",
                                            RbConfig.ruby, script, env: TestHelper::PLAIN_ENV)
    refute status.success?
    assert_match(/--native needs --mode cpu or wall/, err)
  end

  def test_vm_function_hidden_by_the_ruby_stack_appears
    aref = samples_with("rb_hash_aref")
    refute_empty aref, "functions seen: #{profile.function_names.first(40)}"
    aref.each { |s| assert below?(s, "rb_hash_aref", "Object#lookups"), s.functions.inspect }
  end
end
