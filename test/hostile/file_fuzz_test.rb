# frozen_string_literal: true

require "test_helper"
require "json"
require "support/fuzz"
require "support/pprof_wire"

# `fathom report` and `fathom diff` on damaged profiles: real ones (made by
# the profilers when the extension is built, else by protoc, plus the
# committed examples/gc_profile.json.gz) truncated, bit-flipped, with bytes
# inserted, deleted or duplicated, and zip bombs. Every case must give a
# report or a Fathom::Error, in under CASE_SECONDS, without the process
# growing by more than RSS_GROWTH; a few go through exe/fathom, which must
# exit 0, or 1 with one line on stderr.
class FileFuzzTest < Minitest::Test
  # A bound on work that grows with what a file claims, with room for a
  # loaded machine: no case of a fixed reader comes near it.
  CASE_SECONDS = 10
  RSS_GROWTH = 400 << 20

  def setup
    @dir = Dir.mktmpdir("fathom-file-fuzz")
  end

  def teardown
    FileUtils.rm_rf(@dir)
  end

  # {name => gzipped bytes} of real profiles, made once per run.
  def self.seeds
    @seeds ||= begin
      seeds = { "gc.json.gz" => File.binread(File.join(TestHelper::ROOT, "examples/gc_profile.json.gz")) }
      if Fathom::NativeLoader.available?
        kept = []
        seeds["heap.pb.gz"] = Fathom.profile(mode: :heap, exact: true) { 300.times { |i| kept << "s#{i}" * 3 } }.bytes
        seeds["gc.pb.gz"] = Fathom.profile(mode: :gc) { 3.times { GC.start } }.bytes
        seeds["gc-firefox.json.gz"] = Fathom.profile(mode: :gc, format: :firefox) { GC.start }.bytes
        seeds["retention.pb.gz"] = Fathom.retention_snapshot(gc: false, max_depth: 8, progress: nil).bytes
      else
        t = TextProfile.new
        t.sample(%w[leaf mid main], [1, 64, 1, 64], { "class" => "String", "thread" => "main" })
        t.sample(%w[mid main], [3, 120, 0, 0], { "bytes" => [-5, "bytes"] })
        seeds["heap.pb.gz"] = t.gzipped
      end
      seeds
    end
  end

  def rss
    File.read("/proc/self/status")[/^VmRSS:\s+(\d+) kB/, 1].to_i << 10
  rescue SystemCallError
    0
  end

  # The report of `bytes`, or the Fathom::Error it raises: anything else
  # fails, as does a case slower than CASE_SECONDS.
  def check_report(where, bytes, base = nil)
    started = Fuzz.now
    begin
      text = Fathom::Report.for_bytes(bytes).to_s
      assert_kind_of String, text
      if base
        profile = Fathom::Pprof.decode(bytes)
        Fathom::Report::Diff.new(base, profile).to_s if Fathom::Report.kind(base) == Fathom::Report.kind(profile)
      end
    rescue Fathom::Error => e
      assert_equal 1, e.message.lines.size, "#{where}: #{e.message}"
      assert e.message.valid_encoding?, "#{where}: the message is not valid UTF-8"
    rescue Exception => e # rubocop:disable Lint/RescueException -- anything else is a finding
      flunk "#{where}: #{e.class}: #{Fathom::Options.clean(e.message, 300)}\n#{e.backtrace.first(6).join("\n")}"
    end
    took = Fuzz.now - started
    assert_operator took, :<, CASE_SECONDS, "#{where}: took #{took.round(2)}s"
  end

  def test_damaged_profiles
    seeds = self.class.seeds
    decoded = seeds.reject { |name, _| name.include?("json") }.transform_values { |b| Fathom::Pprof.decode(b) }
    rss_before = rss
    Fuzz.run("files", seconds: Fuzz::SECONDS * 3) do |rng, n|
      name, gzipped = seeds.to_a.sample(random: rng)
      raw = Fuzz.gunzip(gzipped)
      # Damage the gzip itself, or the data inside it (gzipped again, so
      # that the damage reaches the decoder past gzip's CRC), or plain data.
      how = rng.rand(3)
      base = how.zero? ? gzipped : raw
      mutation, bytes = Fuzz.mutate(rng, base)
      mutation, bytes = Fuzz.mutate(rng, bytes) if rng.rand(4).zero?
      bytes = Fuzz.gzip(bytes) if how == 1
      where = "#{Fuzz.where("files", n)}: #{mutation} of #{name} (#{%w[gzip inner raw][how]})"
      check_report(where, bytes, decoded[name])
    end
    growth = rss - rss_before
    assert_operator growth, :<, RSS_GROWTH, "the process grew by #{growth >> 20} MiB"
  end

  # The Firefox JSON with a random node replaced by a value of another kind.
  def test_firefox_json_of_random_shapes
    json = JSON.parse(Fuzz.gunzip(self.class.seeds.fetch("gc.json.gz")))
    values = [nil, true, 1, -1, 1.5, 10**30, 1e308, -1e308, "x", "GC", [], [1], {}, { "type" => "GC" }]
    Fuzz.run("firefox-json") do |rng, n|
      doc = Marshal.load(Marshal.dump(json))
      rng.rand(1..3).times { replace_random_node(rng, doc, values) }
      text = JSON.generate(doc, allow_nan: true)
      check_report("#{Fuzz.where("firefox-json", n)}: #{text[0, 200]}", rng.rand(2).zero? ? text : Fuzz.gzip(text))
    end
  end

  def replace_random_node(rng, node, values)
    path = []
    while (Hash === node || Array === node) && !node.empty? && rng.rand(5).positive?
      key = Hash === node ? node.keys.sample(random: rng) : rng.rand(node.size)
      path << [node, key]
      node = node[key]
    end
    return if path.empty?

    parent, key = path.last
    parent[key] = Marshal.load(Marshal.dump(values.sample(random: rng))) # a copy: no cycles
  end

  # Bombs: each must fail fast, within bounded memory.
  def test_zip_bombs
    zeros = Fuzz.gzip("\0".b * (1 << 20), Zlib::BEST_COMPRESSION)
    w = PprofWire
    sample = w.bytes(2, w.packed(1, [2, 1]) + w.packed(2, [64]))
    samples = w.profile + (sample * 200_000) # a valid profile that compresses ~1000x
    bombs = {
      "members of 1 MiB of zeros, 200 MiB in all" => zeros * 200,
      "one member of 64 MiB of zeros" => Fuzz.gzip("\0".b * (64 << 20), Zlib::BEST_COMPRESSION),
      "a gzip of a gzip of zeros" => Fuzz.gzip(zeros * 100),
      "repeated samples" => Fuzz.gzip(samples * 20, Zlib::BEST_COMPRESSION),
      "JSON whitespace" => Fuzz.gzip("{\"threads\":[#{" " * (64 << 20)}]}", Zlib::BEST_COMPRESSION),
      "stacks of 50,000 inlined lines" => Fuzz.gzip(expansion_bomb),
    }
    rss_before = rss
    bombs.each do |name, bytes|
      started = Fuzz.now
      error = assert_raises(Fathom::Error, name) { Fathom::Report.for_bytes(bytes).to_s }
      took = Fuzz.now - started
      assert_operator took, :<, CASE_SECONDS, "#{name}: took #{took.round(2)}s"
      next if name.include?("gzip of a gzip") # inflates to gzip bytes, which are not protobuf

      assert_match(name.include?("inlined") ? /stack frames/ : /inflates to more than/, error.message, name)
    end
    assert_operator rss - rss_before, :<, RSS_GROWTH
  end

  # One location of 50,000 lines under 50,000 samples: 2.5e9 frames.
  def expansion_bomb
    w = PprofWire
    lines = (1..50_000).map { |i| w.bytes(4, w.int(1, 1) + w.int(2, i)) }.join
    sample = w.bytes(2, w.packed(1, [1]) + w.packed(2, [1]))
    w.bytes(1, w.int(1, 1) + w.int(2, 2)) + w.bytes(4, w.int(1, 1) + lines) + w.bytes(5, w.int(1, 1) + w.int(2, 3)) +
      (sample * 50_000) + w.strings(["", "inuse_space", "bytes", "f"])
  end

  # A few damaged files through the real command.
  def test_the_command_on_damaged_files
    seeds = self.class.seeds
    Fuzz.run("files-cli", seconds: 0, min_cases: 3) do |rng, n|
      name, gzipped = seeds.to_a.sample(random: rng)
      mutation, bytes = Fuzz.mutate(rng, rng.rand(2).zero? ? gzipped : Fuzz.gunzip(gzipped))
      path = File.join(@dir, "case#{n}-#{name}")
      File.binwrite(path, bytes)
      started = Fuzz.now
      out, err, status = TestHelper.run_fathom("report", path)
      where = "#{Fuzz.where("files-cli", n)}: #{mutation} of #{name}"
      assert_operator Fuzz.now - started, :<, 10, where
      assert_includes [0, 1], status.exitstatus, "#{where}\n#{err}"
      if status.exitstatus == 1
        assert_equal 1, err.lines.size, "#{where}: #{err}"
        assert err.start_with?("fathom report: #{path}: "), "#{where}: #{err}"
      else
        refute_empty out, where
      end
    end
  end
end
