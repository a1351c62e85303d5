# frozen_string_literal: true

require "test_helper"
require "pathname"
require "support/pprof_wire"

class PprofReaderTest < Minitest::Test
  # Hand-written protobuf for the cases protoc cannot produce (unpacked
  # repeated fields, malformed input).
  Wire = PprofWire

  def setup
    @dir = Dir.mktmpdir("fathom-reader")
  end

  def teardown
    FileUtils.rm_rf(@dir)
  end

  def full_profile
    t = TextProfile.new
    t.sample(%w[leaf mid main], [1, 64, 1, 64], { "class" => "String", "thread" => "main" })
    t.sample(%w[mid main], [3, 120, 0, 0], { "class" => "Array", "bytes" => [-5, "bytes"], "n" => [7, nil] })
    t.sample(%w[main], [-2, -9_000_000_000, 0, 0])
    t.time_nanos = 1_700_000_000_123_456_789
    t.duration_nanos = 2_500_000_000
    t.default_sample_type = "inuse_space"
    t.comments << "first" << "# second"
    t.period = 4096
    t
  end

  def assert_full_profile(profile)
    assert_equal [%w[alloc_objects count], %w[alloc_space bytes], %w[inuse_objects count], %w[inuse_space bytes]], profile.sample_types
    assert_equal 3, profile.samples.size
    s0, s1, s2 = profile.samples
    assert_equal %w[leaf mid main], profile.stack_names(s0)
    assert_equal [1, 64, 1, 64], s0.values
    assert_equal({ "class" => "String", "thread" => "main" }, s0.labels)
    assert_equal({ "class" => "Array", "bytes" => [-5, "bytes"], "n" => [7, nil] }, s1.labels)
    assert_equal [-2, -9_000_000_000, 0, 0], s2.values
    assert_equal({}, s2.labels)
    fn = profile.functions.values.find { |f| f.name == "mid" }
    assert_equal ["mid", "mid", "app.rb"], [fn.name, fn.system_name, fn.filename]
    assert_equal fn.id, fn.start_line
    assert_equal [[fn.id, fn.id * 10]], profile.locations[fn.id]
    assert_equal 1_700_000_000_123_456_789, profile.time_nanos
    assert_equal 2_500_000_000, profile.duration_nanos
    assert_equal %w[space bytes], profile.period_type
    assert_equal 4096, profile.period
    assert_equal "inuse_space", profile.default_sample_type
    assert_equal ["first", "# second"], profile.comments
    assert_equal "", profile.string_table[0]
    assert_equal 3, profile.sample_type_index("inuse_space")
    assert_nil profile.sample_type_index("cpu")
  end

  def test_gzipped_bytes
    skip_unless_protoc!
    assert_full_profile(Fathom::Pprof.read(full_profile.gzipped))
  end

  def test_raw_bytes
    skip_unless_protoc!
    assert_full_profile(Fathom::Pprof.read(full_profile.encode))
  end

  def test_paths
    skip_unless_protoc!
    path = File.join(@dir, "p.pb.gz")
    File.binwrite(path, full_profile.gzipped)
    assert_full_profile(Fathom::Pprof.read(Pathname(path)))
    assert_full_profile(Fathom::Pprof.read_file(path))
  end

  def test_unpacked_repeated_fields_and_inlined_lines
    w = Wire
    strings = ["", "objects", "count", "inlined", "caller"].map { |s| w.bytes(6, s) }.join
    sample = w.int(1, 7) + w.int(1, 8) + w.int(2, 300) + w.int(2, -1)
    data = w.bytes(1, w.int(1, 1) + w.int(2, 2)) + w.bytes(1, w.int(1, 1) + w.int(2, 2)) +
           w.bytes(2, sample) +
           w.bytes(4, w.int(1, 7) + w.bytes(4, w.int(1, 1) + w.int(2, 5)) + w.bytes(4, w.int(1, 2) + w.int(2, 9))) +
           w.bytes(4, w.int(1, 8) + w.int(3, 0x1234)) + # no lines, an address only
           w.bytes(5, w.int(1, 1) + w.int(2, 3)) + w.bytes(5, w.int(1, 2) + w.int(2, 4)) +
           w.int(99, 5) + w.bytes(98, "unknown fields are skipped") + # forward compatibility
           strings
    profile = Fathom::Pprof.decode(data)
    assert_equal [7, 8], profile.samples[0].location_ids
    assert_equal [300, -1], profile.samples[0].values
    assert_equal [[1, 5], [2, 9]], profile.locations[7]
    assert_equal [], profile.locations[8]
    assert_equal %w[inlined caller], profile.stack_names(profile.samples[0])
  end

  # Like pprof's own reader ("empty input file"): zero bytes are no profile,
  # and saying so beats "the profile has no sample types" later.
  def test_empty_input_is_refused
    assert_decode_error("".b, /the profile is empty \(0 bytes\)/)
    assert_decode_error(TestHelper.gzip("".b), /the profile is empty \(a gzip of 0 bytes\)/)
  end

  def test_an_empty_protobuf_message_is_an_empty_profile
    profile = Fathom::Pprof.decode(Wire.bytes(6, ""))
    assert_equal [], profile.samples
    assert_equal [""], profile.string_table
  end

  def assert_decode_error(data, pattern = nil)
    error = assert_raises(Fathom::Pprof::DecodeError) { Fathom::Pprof.decode(data) }
    assert_kind_of Fathom::Error, error
    assert_match pattern, error.message if pattern
    error
  end

  def test_bad_input_raises_decode_error
    w = Wire
    assert_decode_error("\x1f\x8bnot really gzip".b, /not a valid gzip stream/)
    assert_decode_error(w.bytes(6, "") + "\x0a\x05ab".b, /runs past the end/)
    assert_decode_error("\x48".b, /truncated varint/)
    assert_decode_error("\x48\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01".b, /longer than 10 bytes/)
    assert_decode_error(w.bytes(6, "") + "\x7b".b, /unsupported wire type 3/)
    assert_decode_error(w.bytes(6, "x"), /string_table\[0\] must be empty/)
    assert_decode_error(w.bytes(6, "") + w.bytes(1, w.int(1, 9)), /string index 9 out of range/)
    assert_decode_error(w.bytes(6, "") + w.bytes(2, w.packed(1, [5])), /missing location 5/)
    assert_decode_error(w.bytes(6, "") + w.bytes(4, w.int(1, 1) + w.bytes(4, w.int(1, 3))), /missing function 3/)
    assert_decode_error(w.bytes(6, "") + w.bytes(1, "") + w.bytes(2, w.packed(2, [1, 2])), /2 values but the profile has 1 sample types/)
    assert_decode_error(w.bytes(6, "") + w.bytes(2, w.bytes(1, "\x80".b)), /truncated packed varint/)
    assert_decode_error(w.bytes(6, "") + w.bytes(5, w.int(2, 0)), /function id 0/)
    assert_decode_error(w.bytes(6, "") + w.int(1, 3), /expected a length-delimited field/)
  end

  def test_random_garbage_never_raises_anything_else
    rng = Random.new(42)
    200.times do
      data = rng.bytes(rng.rand(1..64))
      begin
        Fathom::Pprof.decode(data)
      rescue Fathom::Pprof::DecodeError
        nil
      end
    end
  end

  def test_truncations_of_a_real_profile
    skip_unless_protoc!
    data = full_profile.encode
    (1...data.bytesize).step(3) do |n|
      Fathom::Pprof.decode(data.byteslice(0, n))
    rescue Fathom::Pprof::DecodeError
      nil
    end
  end

  def test_file_errors_name_the_path
    path = File.join(@dir, "bad.pb.gz")
    File.binwrite(path, "\x1f\x8bjunk".b)
    error = assert_raises(Fathom::Pprof::DecodeError) { Fathom::Pprof.read_file(path) }
    assert_match(/\Afathom: #{Regexp.escape(path)}: not a valid gzip stream/, error.message)
    assert_raises(TypeError) { Fathom::Pprof.read(42) }
    assert_raises(Errno::ENOENT) { Fathom::Pprof.read(Pathname(File.join(@dir, "missing.pb.gz"))) }
  end

  # A String is always a profile's bytes: a file holding a path must not be
  # followed to another file (issue: `fathom report` read /tmp/other.pb.gz
  # for a file containing that path, and /dev/zero until NoMemoryError).
  def test_a_string_is_bytes_not_a_path
    other = File.join(@dir, "other.pb.gz")
    File.binwrite(other, "any content")
    assert_raises(Fathom::Pprof::DecodeError) { Fathom::Pprof.read(other) }
    assert_raises(Fathom::Pprof::DecodeError) { Fathom::Pprof.read("/dev/zero") }
  end

  # A profile shaped like a big heap profile (many samples with 40-frame
  # stacks, labels), built by repeating encoded samples.
  def big_profile(samples)
    w = Wire
    frames = 2_000
    strings = ["", "alloc_objects", "count", "alloc_space", "bytes", "inuse_objects", "inuse_space", "class", "thread", "main", "String"] +
              (1..frames).map { |i| "Module#{i}::Klass#method_#{i}" } + ["app/file.rb"]
    out = +"".b
    %w[1:2 3:4 5:2 6:4].each { |pair| t, u = pair.split(":").map(&:to_i); out << w.bytes(1, w.int(1, t) + w.int(2, u)) }
    labels = w.bytes(3, w.int(1, 7) + w.int(2, 10)) + w.bytes(3, w.int(1, 8) + w.int(2, 9))
    templates = (0...64).map do |k|
      stack = (0...40).map { |d| 1 + ((k * 37 + d * 53) % frames) }
      w.bytes(2, w.packed(1, stack) + w.packed(2, [1 + k, 40 * (k + 1), k % 2, 40 * (k % 2) * 1000]) + labels)
    end
    samples.times { |i| out << templates[i % 64] }
    (1..frames).each do |id|
      out << w.bytes(4, w.int(1, id) + w.bytes(4, w.int(1, id) + w.int(2, id)))
      out << w.bytes(5, w.int(1, id) + w.int(2, 10 + id) + w.int(3, 10 + id) + w.int(4, strings.size - 1))
    end
    strings.each { |s| out << w.bytes(6, s) }
    out
  end

  def test_large_profile_decodes_quickly
    data = big_profile(Integer(ENV.fetch("FATHOM_BIG_PROFILE_SAMPLES", "20000")))
    started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    profile = Fathom::Pprof.decode(TestHelper.gzip(data))
    elapsed = Process.clock_gettime(Process::CLOCK_MONOTONIC) - started
    assert_equal Integer(ENV.fetch("FATHOM_BIG_PROFILE_SAMPLES", "20000")), profile.samples.size
    assert_equal 40, profile.samples.last.location_ids.size
    # ~4 MB uncompressed. Not a benchmark: a floor that quadratic decoding
    # (minutes) would miss, with room for a loaded machine (1.3 MB/s seen
    # under a load average of 16; ~15 MB/s on a quiet one).
    mb_per_s = data.bytesize / 1e6 / elapsed
    assert_operator mb_per_s, :>, 0.3, "decoded #{data.bytesize} bytes at #{mb_per_s.round(1)} MB/s"
  end
end
