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
    require "digest/sha2" # not in the profile: Digest::SHA256's autoload calls rb_hash_aref
    def compress(data) = Zlib::Deflate.deflate(data)
    def digest(big) = Digest::SHA256.hexdigest(big)
    def lookups(hash, keys)
      total = 0
      360.times { keys.each { |k| total += hash[k] } }
      total
    end
    profiler = Fathom::CpuProfiler.new(mode: :cpu, interval: 0.001, native: true).start
    compress(Random.new(1).bytes(1 << 20) * 12)
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

  # CPU samples come at the kernel's 4 ms tick here (1 ms asked; never
  # fewer than one per 5 ms of CPU measured): how many a call gets is the
  # clock's, not luck. Each lands in a part of the call with that part's
  # CPU share f, independently (binomial).

  def test_libz_frames_under_zlib_deflate
    zlib = samples_with("Zlib::Deflate.deflate")
    refute_empty zlib
    libz = zlib.select { |s| s.functions.include?("deflate") }
    # 12 MiB: ~340 ms, n >= 68 samples (80-129 measured; 6 MiB gave 40-53),
    # f = 0.84 in libz (367 of 437 samples, 10 runs; >= 0.8 at 95%),
    # samples of about equal CPU (a tick each). P(Bin(68, 0.8) <= 33)
    # = 8e-9; with 6 MiB, P(Bin(39, 0.8) <= 19) = 1.3e-5.
    assert_operator libz.sum { |s| s.values[profile.index_of("cpu")] },
                    :>=, zlib.sum { |s| s.values[profile.index_of("cpu")] } / 2,
                    "most of Zlib::Deflate.deflate's CPU time is in libz's deflate"
    samples_with("deflate").each { |s| assert below?(s, "deflate", "Zlib::Deflate.deflate"), s.functions.inspect }
  end

  def test_native_digest_function_under_its_ruby_frame
    sha = samples_with(/SHA256_(Update|Transform|Final)|sha256_block/i)
    # SHA256 of 24 MiB: ~80 ms, n >= 15 samples (16-44 measured), 785 of
    # 787 Digest samples in the SHA256 function (34 runs; f > 0.95):
    # P(none) < 0.05^15 < 1e-19.
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
    # 4 MiB deflated: ~110 ms, n >= 22 samples, f = 0.84 in libz (above):
    # P(none) <= 0.2^22 < 1e-15.
    refute_empty libz, "functions seen: #{raw.function_names.first(40)}"
    libz.each { |s| assert below?(s, "deflate", "Zlib::Deflate.deflate"), s.functions.inspect }
    _o, err, status = TestHelper.run_fathom("run", "--mode", "heap", "--native", "-o", File.join(@dir, "h.pb.gz"), "--",
                                            RbConfig.ruby, script, env: TestHelper::PLAIN_ENV)
    refute status.success?
    assert_match(/--native needs --mode cpu or wall/, err)
  end

  def test_vm_function_hidden_by_the_ruby_stack_appears
    aref = samples_with("rb_hash_aref")
    # 360 rounds: ~270 ms, n >= 53 samples in lookups (63-133 measured;
    # 120 rounds gave 20-34); rb_hash_aref and its callees hold f = 0.53 of
    # them (127 of 240, 10 runs; 0.38 in the worst run). P(none) <= 0.62^53
    # < 1e-11; with 120 rounds 0.62^20 = 7e-5.
    refute_empty aref, "functions seen: #{profile.function_names.first(40)}"
    # Only lookups calls rb_hash_aref while the profiler runs, so any sample
    # of it is there: deterministic. (Digest::SHA256 loaded on first use,
    # Digest.const_missing -> require -> Gem.find_default_spec, called it
    # too: one such sample failed this in 1 of 6 runs.)
    aref.each { |s| assert below?(s, "rb_hash_aref", "Object#lookups"), s.functions.inspect }
  end
end
