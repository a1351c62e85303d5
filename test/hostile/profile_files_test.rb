# frozen_string_literal: true

require "test_helper"
require "json"
require "pathname"
require "support/pprof_wire"
require "support/cli_runner"

# Issue 10, item 10: files that got the wrong message, the wrong exit
# status, a stack trace, or seconds of work before failing. Every one is now
# a Fathom::Error in Ruby and, from `fathom report`/`fathom diff`, exit
# status 1 with one line on stderr that names the file.
class ProfileFilesTest < Minitest::Test
  include CLIRunner
  W = PprofWire

  def setup
    @dir = Dir.mktmpdir("fathom-files")
  end

  def teardown
    FileUtils.rm_rf(@dir)
  end

  def file(name, bytes)
    path = File.join(@dir, name)
    File.binwrite(path, bytes)
    path
  end

  def assert_bad_data(bytes, pattern)
    error = assert_raises(Fathom::Error) { Fathom::Report.for_bytes(bytes).to_s }
    assert_match pattern, error.message
    path = file("bad.pb.gz", bytes)
    r = run_cli("report", path)
    assert_equal 1, r.status, "stdout: #{r.out}\nstderr: #{r.err}"
    assert_equal 1, r.err.lines.size, r.err
    assert r.err.start_with?("fathom report: #{path}: "), r.err
    assert_match pattern, r.err
    r
  end

  def gzip(bytes)
    TestHelper.gzip(bytes)
  end

  # Time limits here catch work that grows with what a file claims (11 s
  # for the 100 MB bomb before the limit, hours for the expanding stacks),
  # with room for a loaded 2-core machine: they are not benchmarks.
  def elapsed
    started = Process.clock_gettime(Process::CLOCK_MONOTONIC)
    yield
    Process.clock_gettime(Process::CLOCK_MONOTONIC) - started
  end

  # Was "the profile has no sample types" with exit 2, as if a flag were wrong.
  def test_an_empty_file
    r = run_cli("report", file("empty.pb.gz", ""))
    assert_equal 1, r.status
    assert_equal "fathom report: #{@dir}/empty.pb.gz: the file is empty (0 bytes), not a profile\n", r.err
    assert_bad_data(gzip(""), /the profile is empty \(a gzip of 0 bytes\)/)
    r = run_cli("diff", file("a.pb.gz", ""), file("b.pb.gz", ""))
    assert_equal 1, r.status
    assert_match(/\Afathom diff: .*a\.pb\.gz: the file is empty/, r.err)
  end

  # A profile that is not one is bad data (1), not bad usage (2).
  def test_a_profile_without_sample_types
    assert_bad_data(W.strings([""]), /not a usable profile: it has no sample types/)
  end

  # Random bytes, gzipped: "not a pprof profile" naming the file, exit 1.
  def test_gzip_of_garbage
    rng = Random.new(10)
    20.times do
      r = assert_bad_data(gzip(rng.bytes(200)), /not a pprof profile: malformed data at byte \d+/)
      assert_match(/bad\.pb\.gz: not a pprof profile/, r.err)
    end
  end

  # A valid protobuf of another message: profile.proto's own descriptor.
  def test_gzip_of_a_protobuf_that_is_not_pprof
    skip_unless_protoc!
    descriptor, err, status = Open3.capture3("protoc", "--descriptor_set_out=/dev/stdout", "-I", TestHelper::PROTO_DIR,
                                             "profile.proto", binmode: true)
    assert status.success?, err
    assert_bad_data(gzip(descriptor), /not a pprof profile: malformed data at byte \d+: expected a varint, got wire type 2/)
    # One that happens to parse (fields 6 and 13 only) is a profile without sample types.
    assert_bad_data(gzip(W.strings(["", "x"]) + W.int(13, 1)), /it has no sample types/)
  end

  # A unit with invalid UTF-8 reached String#downcase: ArgumentError and a
  # stack trace. A frame name with it reached String#sub in `fathom diff`:
  # "invalid byte sequence in UTF-8" as a usage error (exit 2).
  def test_strings_with_invalid_utf8_are_scrubbed
    bytes = W.profile(table: ["", "inuse_space", "byt\xffes", "main", "le\xe2af"])
    report = Fathom::Report.for_bytes(bytes).to_s
    assert_match(/le\uFFFDaf/, report)
    retention = W.profile(table: ["", "retained_space", "bytes", "inuse_space", "inuse_objects", "count", "vm \xff (Hash)", "leaf (String)"],
                          types: [[1, 2], [3, 2], [4, 5]], samples: [[[2, 1], [5, 5, 1]]], functions: { 1 => 6, 2 => 7 })
    path = file("ret.pb.gz", gzip(retention))
    r = run_cli("diff", path, path)
    assert_equal 0, r.status, r.err
    assert_match(/No path grew/, r.out)
    r = run_cli("report", path)
    assert_equal 0, r.status, r.err
    assert_match(/vm \uFFFD \(Hash\) → leaf \(String\)/, r.out)
  end

  # Found by the option fuzzer: bytes given as a UTF-8 String with
  # non-ASCII characters met the binary gzip magic in String#start_with?
  # (Encoding::CompatibilityError).
  def test_bytes_in_a_utf8_string
    error = assert_raises(Fathom::Error) { Fathom::Report.for_bytes("µs\xff") }
    assert_match(/not a pprof profile/, error.message)
    assert_match(/\AFathom heap profile: 3 bytes\z/, Fathom::Profile.new("µs").to_s)
    assert_equal %w[leaf main], Fathom::Report.for_bytes(gzip(W.profile).force_encoding(Encoding::UTF_8)).rows.map(&:name)
  end

  # 100 MB of zeros (97 kB of gzip) inflated fully and parsed for 11 s.
  def test_a_zip_bomb_fails_fast
    io = StringIO.new(+"".b)
    gz = Zlib::GzipWriter.new(io)
    zeros = "\0".b * (1 << 20)
    100.times { gz.write(zeros) }
    gz.close
    bomb = io.string
    took = elapsed { assert_bad_data(bomb, /inflates to more than 16MiB, the limit for \d+(\.\d)?KiB of gzip/) }
    assert_operator took, :<, 5, "a zip bomb took #{took.round(2)}s to refuse"
    json_bomb = gzip("{\"threads\": [#{" " * (40 << 20)}]}")
    took = elapsed { assert_bad_data(json_bomb, /inflates to more than 16MiB/) }
    assert_operator took, :<, 5
  end

  # 800 kB (a few kB gzipped): one location of 50,000 inlined lines under
  # 50,000 samples. Every report expanded it to 2.5e9 frames: hours.
  def test_stacks_that_expand_beyond_the_file
    lines = (1..50_000).map { |i| W.bytes(4, W.int(1, 1) + W.int(2, i)) }.join
    sample = W.bytes(2, W.packed(1, [1]) + W.packed(2, [1]))
    bomb = W.bytes(1, W.int(1, 1) + W.int(2, 2)) + W.bytes(4, W.int(1, 1) + lines) + W.bytes(5, W.int(1, 1) + W.int(2, 3)) +
           (sample * 50_000) + W.strings(["", "inuse_space", "bytes", "f"])
    took = elapsed do
      assert_bad_data(gzip(bomb), /expand to 2500000000 stack frames \(2500000000 bytes of function names\), more than Fathom reads/)
    end
    assert_operator took, :<, 5
    # Names: 300 samples under one 1 MB name are 300 MB to hash.
    long = W.profile(table: ["", "inuse_space", "bytes", "main", "x" * (1 << 20)], samples: [[[2], [1]]] * 300)
    assert_bad_data(gzip(long), /bytes of function names\), more than Fathom reads/)
  end

  # Zeros inside the limit were parsed as field 0, two bytes at a time.
  def test_field_zero_is_not_protobuf
    took = elapsed { assert_bad_data("\0".b * (8 << 20), /at byte 1: field number 0/) }
    assert_operator took, :<, 5
  end

  def test_the_limit_is_a_ratio_with_a_floor
    limit = Fathom::Files::ProfileBytes.gunzip_limit(1 << 20)
    assert_equal 100 << 20, limit
    assert_equal 16 << 20, Fathom::Files::ProfileBytes.gunzip_limit(10)
    assert_equal 512 << 20, Fathom::Files::ProfileBytes.gunzip_limit(1 << 30)
    # A profile that compresses well below the ratio reads as before.
    profile = W.profile
    assert_equal [[2, 1]], Fathom::Pprof.decode(gzip(profile)).samples.map(&:location_ids)
    error = assert_raises(Fathom::Error) { Fathom::Files::ProfileBytes.gunzip(gzip("x" * 5000), limit: 4096) }
    assert_match(/inflates to more than 4KiB/, error.message)
  end

  def test_concatenated_gzip_members_and_trailing_junk
    profile = W.profile
    half = profile.bytesize / 2
    two = gzip(profile.byteslice(0, half)) + gzip(profile.byteslice(half..))
    assert_equal 1, Fathom::Pprof.decode(two).samples.size
    assert_bad_data(gzip(profile) + "junk", /data after the gzip stream is not gzip/)
    assert_bad_data(gzip(profile).byteslice(0, 30), /the gzip stream is truncated|not a valid gzip stream/)
  end

  # A 10th varint byte above 1 overflowed into values past 64 bits.
  def test_varints_past_64_bits
    assert_bad_data(W.profile + W.key(9, 0) + "\xff\xff\xff\xff\xff\xff\xff\xff\xff\x7f".b, /varint overflows 64 bits/)
    sample = W.bytes(2, W.bytes(1, W.varint(1)) + W.bytes(2, "\xff\xff\xff\xff\xff\xff\xff\xff\xff\x02".b))
    assert_bad_data(W.profile + sample, /varint overflows 64 bits/)
    assert_bad_data(W.profile + W.key(9, 0) + ("\xff".b * 20), /varint longer than 10 bytes/)
  end

  # A negative index (an int64 field) read from the end of the table; one
  # past 2**63 (an unsigned field) raised RangeError from Array#fetch.
  def test_string_indexes_out_of_range
    assert_bad_data(W.profile(types: [[-1, 2]]), /string index -1 out of range/)
    label = W.bytes(3, W.int(1, 2**64 - 1) + W.int(2, 1))
    assert_bad_data(W.profile + W.bytes(2, W.packed(1, [1]) + W.packed(2, [1]) + label), /string index 18446744073709551615 out of range/)
    assert_bad_data(W.profile(functions: { 1 => 3, 2 => 99 }), /string index 99 out of range/)
  end

  def test_lengths_and_ids_that_do_not_exist
    assert_bad_data(W.profile + W.key(2, 2) + W.varint(2**63), /runs past the end/)
    assert_bad_data(W.profile + W.key(2, 2) + W.varint(2**64 - 1), /runs past the end/) # a "negative" length
    nested = W.bytes(4, W.int(1, 9) + W.key(4, 2) + W.varint(1000) + W.int(1, 1))
    assert_bad_data(W.profile + nested, /runs past the end/)
    inner = W.bytes(4, W.int(1, 9) + W.bytes(4, W.int(1, 1) + W.int(2, 3) + W.int(2, 4)).byteslice(0, 4) + W.int(2, 1))
    assert_bad_data(W.profile + inner, /overruns its length|runs past|expected/)
    assert_bad_data(W.profile(samples: [[[7], [1]]]), /missing location 7/)
    assert_bad_data(W.profile + W.bytes(4, W.int(1, 5) + W.bytes(4, W.int(1, 42))), /missing function 42/)
    assert_bad_data(W.profile(samples: [[[1], [1, 2]]]), /2 values but the profile has 1 sample types/)
  end

  def test_truncations_and_bit_flips_of_a_real_profile
    bytes = gzip(W.profile)
    (1...bytes.bytesize).each do |n|
      assert_raises(Fathom::Error) { Fathom::Report.for_bytes(bytes.byteslice(0, n)).to_s }
    end
    raw = W.profile
    (0...raw.bytesize * 8).each do |bit|
      flipped = raw.dup
      flipped.setbyte(bit / 8, flipped.getbyte(bit / 8) ^ (1 << (bit % 8)))
      begin
        Fathom::Report.for_bytes(flipped).to_s
      rescue Fathom::Error
        nil
      end
    end
  end

  # Truncated JSON went to the pprof reader ("malformed pprof data"); wrong
  # shapes raised NoMethodError/TypeError, numbers too large FloatDomainError.
  def test_firefox_json_of_the_wrong_shape
    good = { "meta" => { "profilingStartTime" => 0, "profilingEndTime" => 10 },
             "threads" => [{ "markers" => { "data" => [{ "type" => "GC", "gc_ms" => 1.5, "gcs" => 1, "gc_type" => "minor" }] } }] }
    assert_match(/1 GCs \(1 minor, 0 major\)/, Fathom::Report.for_bytes(JSON.dump(good)).to_s)
    assert_bad_data(JSON.dump(good)[0, 40], /not valid Firefox Profiler JSON \(truncated or malformed/)
    assert_bad_data(gzip(JSON.dump(good)[0, 40]), /not valid Firefox Profiler JSON/)
    assert_bad_data("{}", /not a Firefox Profiler profile \(no threads\)/)
    assert_bad_data('{"threads": [1]}', /threads\[\] is not an object/)
    assert_bad_data('{"threads": [], "meta": 5}', /meta is not an object/)
    assert_bad_data('{"threads": [{"markers": []}]}', /markers is not an object/)
    assert_bad_data('{"threads": [{"markers": {"data": {}}}]}', /markers.data is not an array/)
    assert_bad_data('{"threads": [{"markers": {"data": [{"type": "GC", "gc_ms": [1]}]}}]}', /gc_ms is not a number/)
    assert_bad_data('{"threads": [], "meta": {"profilingEndTime": 1e400}}', /profilingEndTime is not a number/)
    assert_bad_data('{"threads": [], "meta": {"profilingEndTime": 1e308, "profilingStartTime": -1e308}}', /times out of range/)
    assert_bad_data("{#{"[" * 1000}", /not valid Firefox Profiler JSON/)
    # Found by the file fuzzer: the parser's message quoted invalid UTF-8,
    # and String#strip raised ArgumentError on it.
    assert_bad_data("{\"a\": \"\u00e9\" x".b, /not valid Firefox Profiler JSON \(truncated or malformed: .*unexpected token/)
    # Found by the file fuzzer (seed 1997950834): invalid UTF-8 inside a
    # string parsed, and the report raised ArgumentError reading meta.product.
    assert_bad_data("{\"a\": \"\xff\" x".b, /not valid Firefox Profiler JSON \(it holds bytes that are not UTF-8\)/)
    assert_bad_data(gzip(%({"meta": {"product": "Fathom cpu\xff profile"}, "threads": []}).b), /bytes that are not UTF-8/)
  end

  def test_devices_directories_and_pipes
    r = run_cli("report", "/dev/zero")
    assert_equal 1, r.status
    assert_equal "fathom report: /dev/zero: a device, not a profile\n", r.err
    r = run_cli("report", @dir)
    assert_equal "fathom report: #{@dir}: a directory, not a profile\n", r.err
    assert_raises(Fathom::Error) { Fathom::Pprof.read(Pathname("/dev/zero")) }
    # A pipe is fine (fathom report <(zcat ...)): the size limit bounds it.
    reader, writer = IO.pipe
    Thread.new { writer.write(gzip(W.profile)); writer.close }
    r = run_cli("report", "/dev/fd/#{reader.fileno}")
    assert_equal 0, r.status, r.err
    assert_match(/  leaf$/, r.out)
  ensure
    reader&.close
  end

  def test_diff_exit_statuses
    heap = file("heap.pb.gz", gzip(W.profile))
    gc = file("gc.pb.gz", gzip(W.profile(table: ["", "wall", "nanoseconds", "main", "leaf", "gc_steps", "count"], types: [[1, 2], [5, 6]], samples: [])))
    r = run_cli("diff", heap, gc)
    assert_equal 1, r.status
    assert_equal "fathom diff: #{heap} and #{gc}: cannot diff a heap profile against a gc profile\n", r.err
    r = run_cli("diff", heap, file("ff.json", "{}"))
    assert_equal 1, r.status
    assert_match(/ff\.json: a Firefox Profiler file; fathom diff compares pprof profiles$/, r.err)
    r = run_cli("diff", "--sample-index", "cpu", heap, heap)
    assert_equal 2, r.status
    assert_match(/unknown sample_index "cpu" \(available: inuse_space\)/, r.err)
  end
end
