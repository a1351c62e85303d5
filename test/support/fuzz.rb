# frozen_string_literal: true

require "zlib"
require "pathname"

# Seeded, time-bounded fuzzing for the test/hostile suites.
#
#   FATHOM_FUZZ_SEED=123     replay a run (the seed is printed once per run)
#   FATHOM_FUZZ_SECONDS=10   time per fuzz target (default 1; the suite's
#                            budget is ~60 s per Ruby, so keep it small)
#
# Each target draws from its own Random, seeded from the run's seed and the
# target's name, so one target's cases do not depend on how many another
# managed in its time. A failure names the seed and the case number: rerun
# with that seed (and enough seconds to reach the case) to replay it.
module Fuzz
  SEED = ENV["FATHOM_FUZZ_SEED"] ? Integer(ENV["FATHOM_FUZZ_SEED"], 10) : Random.new_seed % (1 << 32)
  SECONDS = Float(ENV.fetch("FATHOM_FUZZ_SECONDS", "1"))

  @announced = false

  module_function

  def announce
    return if @announced

    @announced = true
    $stderr.puts "\nfuzz seed #{SEED} (replay: FATHOM_FUZZ_SEED=#{SEED}; FATHOM_FUZZ_SECONDS=#{SECONDS})"
  end

  # Yields (rng, case_number) until `seconds` have passed (at least
  # `min_cases` times). Returns the number of cases run.
  def run(target, seconds: SECONDS, min_cases: 1)
    announce
    rng = Random.new(SEED ^ Zlib.crc32(target))
    deadline = now + seconds
    n = 0
    while n < min_cases || now < deadline
      yield rng, n
      n += 1
    end
    n
  end

  def where(target, n)
    "#{target}, case #{n} (FATHOM_FUZZ_SEED=#{SEED})"
  end

  def now
    Process.clock_gettime(Process::CLOCK_MONOTONIC)
  end

  # ---- values of every kind, for options ------------------------------

  class OddInspect
    def inspect = raise("inspect failed")
  end

  class LongInspect
    def inspect = "line\n" * 5000
  end

  class StrLike
    def initialize(s) = @s = s
    def to_str = @s
    def to_s = @s
  end

  class BadToPath
    def to_path = 42
  end

  class RaisingToS
    def to_s = raise("to_s failed")
  end

  INTEGERS = [0, 1, -1, 2, 3, 7, 64, 128, 4096, 4097, 100_000, 2**31 - 1, 2**31, 2**32 - 1, 2**32,
              2**62, 2**63 - 1, 2**63, 2**64, 2**70, -2**70, 10**400, -(10**400)].freeze
  FLOATS = [0.0, -0.0, 1e-9, 1e-5, 0.001, 0.01, 0.5, 1.0, 1.5, 59.9, 60.0, 3600.0, 7200.5, 1e18, 1e300,
            Float::MAX, Float::MIN, Float::EPSILON, 5e-324, -1.0, -1e300,
            Float::INFINITY, -Float::INFINITY, Float::NAN].freeze
  STRINGS = ["", " ", "0", "1", "-1", "10ms", "1ms", "500us", "2s", "100ns", "0.1ms", ".5", "5.", "1e-3",
             "1e99999999", "1e-99999999", "9" * 40, "9" * 200, "1e", "e5", "1 ms", "1ms ", " 1ms", "1msx",
             "1µs", "1\u00b5s", "1h", "NaN", "Infinity", "-Infinity", "0x10", "1_000", "１", "abc",
             "heap", "gc", "retention", "heap,gc", "heap,,gc", ",", "heap,retention", "cpu", "pprof", "firefox",
             "auto", "weakmap", "object_id", "true", "false", "yes",
             "\xff", "1\xffms", "heap\xff", "\0", "a\0b", "~fathom-no-such-user/x", "~", "/dev/null", "/",
             "x.pb.gz", "sub/dir/x.pb.gz", "..", "%{pid}", "%", "%{host}", "%d", "a/b", "x" * 5000].freeze
  SYMBOLS = %i[heap gc retention pprof firefox auto object_id weakmap bogus inuse_space alloc_space all].freeze

  def odd_object(rng)
    case rng.rand(14)
    when 0 then Object.new
    when 1 then BasicObject.new
    when 2 then OddInspect.new
    when 3 then LongInspect.new
    when 4 then StrLike.new(STRINGS.sample(random: rng))
    when 5 then BadToPath.new
    when 6 then RaisingToS.new
    when 7 then Pathname.new(STRINGS.sample(random: rng).then { |s| s.include?("\0") || s.empty? ? "p" : s })
    when 8 then Rational(rng.rand(-5..5), rng.rand(1..1000))
    when 9 then Complex(1, 1)
    when 10 then (1..2)
    when 11 then -> {}
    when 12 then Struct.new(:a).new(1)
    else Class.new
    end
  end

  # Any Ruby value, biased towards the ones that break option checks.
  def value(rng, extra = [])
    case rng.rand(12)
    when 0 then INTEGERS.sample(random: rng)
    when 1 then rng.rand(-1000..10_000)
    when 2 then FLOATS.sample(random: rng)
    when 3, 4 then STRINGS.sample(random: rng)
    when 5 then random_text(rng)
    when 6 then SYMBOLS.sample(random: rng)
    when 7 then [nil, true, false].sample(random: rng)
    when 8 then [[], [:heap], %i[heap gc], [nil], [[:heap]], [1, 2], { a: 1 }, {}].sample(random: rng)
    when 9 then odd_object(rng)
    else extra.empty? ? STRINGS.sample(random: rng) : extra.sample(random: rng)
    end
  end

  # Short text: duration-ish pieces, or random bytes.
  def random_text(rng)
    return rng.bytes(rng.rand(0..12)).force_encoding(Encoding::UTF_8) if rng.rand(3).zero?

    pieces = ["1", "0", "9", "5", ".", "e", "e-", "e+", "ms", "us", "s", "ns", "µs", " ", "-", "+", "9999", "1e30"]
    Array.new(rng.rand(1..6)) { pieces.sample(random: rng) }.join
  end

  # ---- mutations of files ---------------------------------------------

  # One mutation of `bytes` (binary), with its name for messages.
  def mutate(rng, bytes)
    bytes = bytes.b
    size = bytes.bytesize
    return ["insert", interesting_bytes(rng)] if size.zero?

    case rng.rand(9)
    when 0 then ["truncate", bytes.byteslice(0, rng.rand(0...[size, 1].max))]
    when 1
      out = bytes.dup
      rng.rand(1..8).times do
        i = rng.rand(size)
        out.setbyte(i, out.getbyte(i) ^ (1 << rng.rand(8)))
      end
      ["bit flips", out]
    when 2
      at = rng.rand(0..size)
      ["insert", bytes.byteslice(0, at) + interesting_bytes(rng) + bytes.byteslice(at..)]
    when 3
      at = rng.rand(0...size)
      len = rng.rand(1..[16, size - at].min)
      ["delete", bytes.byteslice(0, at) + bytes.byteslice((at + len)..)]
    when 4
      at = rng.rand(0...size)
      piece = interesting_bytes(rng)
      ["overwrite", (bytes.byteslice(0, at) + piece + bytes.byteslice((at + piece.bytesize)..).to_s).byteslice(0, size)]
    when 5
      from = rng.rand(0...size)
      len = rng.rand(1..[64, size - from].min)
      at = rng.rand(0..size)
      ["duplicate", bytes.byteslice(0, at) + bytes.byteslice(from, len) + bytes.byteslice(at..)]
    when 6 then ["append", bytes + interesting_bytes(rng)]
    when 7 then ["prefix", interesting_bytes(rng) + bytes]
    else
      out = bytes.dup
      rng.rand(1..4).times { out.setbyte(rng.rand(size), rng.rand(256)) }
      ["random bytes", out]
    end
  end

  # Bytes that mean something to a protobuf or gzip reader.
  def interesting_bytes(rng)
    case rng.rand(8)
    when 0 then "\xff".b * rng.rand(1..12)             # endless / overlong varints
    when 1 then "\x80".b * rng.rand(1..10) + "\x7f".b  # a varint past 64 bits
    when 2 then "\x00".b * rng.rand(1..32)             # field 0
    when 3 then "\x1f\x8b".b                           # gzip magic
    when 4 then [rng.rand(1..15) << 3 | rng.rand(8)].pack("C") # any key
    when 5 then "\x12\xff\xff\xff\xff\x0f".b           # sample with a 4 GB length
    when 6 then "{\"".b
    else rng.bytes(rng.rand(1..8))
    end
  end

  def gzip(bytes, level = Zlib::DEFAULT_COMPRESSION)
    io = StringIO.new(+"".b)
    gz = Zlib::GzipWriter.new(io, level)
    gz.write(bytes)
    gz.close
    io.string
  end

  def gunzip(bytes)
    Zlib.gunzip(bytes)
  end
end
