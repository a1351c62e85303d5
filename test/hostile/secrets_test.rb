# frozen_string_literal: true

require "test_helper"
require "open3"
require "zlib"
require "support/pprof_raw"

# Profiles must not carry the contents of the program's strings: a hash
# keyed by API keys or logins (API_CLIENTS = {"sk_live_…" => client}) once
# put the keys verbatim into retention frames. By default a String key is
# named by its shape, {"…" 32 bytes #8bcd}; string_contents: true
# (fathom run --string-contents, fathom analyze --string-contents) opts in.
class SecretsTest < Minitest::Test
  SCRIPT = File.expand_path("../fixtures/secrets_script.rb", __dir__)
  SECRETS = ["sk_live_4eC39", "s3cr3t", "alice@example.com"].freeze
  # {"…" <bytes> #<16-bit FNV-1a>} (core/retention/key_shape.h), pinned.
  KEY_SHAPE = %({"…" 32 bytes #8bcd})
  LOGIN_SHAPE = %({"…" 27 bytes #f177})

  class << self
    attr_accessor :dir
  end

  # One run of the script for every test (it takes several snapshots).
  def setup
    require_native!
    return if self.class.dir

    self.class.dir = Dir.mktmpdir("fathom-secrets")
    Minitest.after_run { FileUtils.rm_rf(self.class.dir) }
    _o, err, status = Open3.capture3(TestHelper::PLAIN_ENV, RbConfig.ruby, "-I#{TestHelper::LIB}", SCRIPT, self.class.dir)
    assert status.success?, err
  end

  def path(name) = File.join(self.class.dir, name)

  def gunzipped(name) = Zlib.gunzip(File.binread(path(name)))

  def refute_secrets(text, what)
    # Not refute_includes: its message would print the whole profile.
    SECRETS.each { |s| refute text.b.include?(s.b), "#{what} holds #{s.inspect}" }
  end

  def test_retention_snapshot_names_string_keys_by_their_shape
    bytes = gunzipped("default.pb.gz")
    refute_secrets bytes, "the snapshot's protobuf"
    assert bytes.include?(KEY_SHAPE.b), KEY_SHAPE
    assert bytes.include?(LOGIN_SHAPE.b), LOGIN_SHAPE
    assert bytes.include?("{:… 36 bytes #".b), "a dynamic Symbol key is shaped too"

    report, err, status = TestHelper.run_fathom("report", path("default.pb.gz"), "--top", "500")
    assert status.success?, err
    refute_secrets report, "fathom report"

    skip_unless_go!
    raw = PprofRaw.read(path("default.pb.gz"))
    refute_secrets raw.output, "go tool pprof -raw"
    assert(raw.function_names.any? { |n| n.start_with?("#{KEY_SHAPE} (Client)") }, raw.function_names.grep(/Client/).inspect)
  end

  def test_string_contents_opts_in
    bytes = gunzipped("contents.pb.gz")
    assert bytes.include?(%({"sk_live_4eC39HqLyjWDarjtT1zdp7dc"} (Client)).b)
    assert bytes.include?(%({"alice@example.com:s3cr3t-pw"} (Client)).b)
    assert bytes.include?(":sk_live_4eC39HqLyjWDarjtT1zdp7dc_sym}".b)
    skip_unless_go!
    assert_includes PprofRaw.read(path("contents.pb.gz")).output, "sk_live_4eC39HqLyjWDarjtT1zdp7dc"
  end

  # The shape is the same in every snapshot: fathom diff matches the chain
  # through the key and shows its growth.
  def test_diff_matches_shaped_keys_across_snapshots
    out, err, status = TestHelper.run_fathom("diff", path("default.pb.gz"), path("grown.pb.gz"), "--top", "5")
    assert status.success?, err
    refute_secrets out, "fathom diff"
    row = out.lines.find { |l| l.include?("#{KEY_SHAPE} (Client) → @log (Array) → [10+] (Object)") }
    refute_nil row, out
    assert_match(/\+2990\s/, row, "the 3,000 new objects but the 10 in slots [0]..[9]")
  end

  def test_heap_gc_and_cpu_profiles_hold_no_string_contents
    %w[heap gc cpu].each do |mode|
      bytes = gunzipped("run.#{mode}.pb.gz")
      refute_secrets bytes, "the #{mode} profile"
    end
    report, err, status = TestHelper.run_fathom("report", path("run.heap.pb.gz"))
    assert status.success?, err
    refute_secrets report, "fathom report of the heap profile"
  end

  def test_fathom_analyze_shows_no_string_contents_by_default
    skip "no heap-dump reader in this build" unless Fathom::Native.respond_to?(:analyze_dump)
    out_pb = path("dump.pb.gz")
    out, err, status = TestHelper.run_fathom("analyze", path("heap.json"), "-o", out_pb, "--top", "200")
    assert status.success?, err
    refute_secrets out, "fathom analyze's report"
    assert_includes out, "Strings are not named by their value"
    refute_secrets Zlib.gunzip(File.binread(out_pb)), "fathom analyze's profile"
    diff, err, status = TestHelper.run_fathom("analyze", "--diff", path("heap.json"), path("heap.json"))
    assert status.success?, err
    refute_secrets diff, "fathom analyze --diff"

    named_pb = path("dump_named.pb.gz")
    _out, err, status = TestHelper.run_fathom("analyze", "--string-contents", path("heap.json"), "-o", named_pb)
    assert status.success?, err
    # Named by the start of the value, cut before the first digit: the
    # script's 5,000 strings "sk_live_4eC39…:alice@…:N" share one prefix.
    assert Zlib.gunzip(File.binread(named_pb)).include?(%("sk_live_…").b), "opt-in names strings"
  end

  def test_fathom_run_string_contents
    script = File.join(self.class.dir, "hold.rb")
    File.write(script, %(API_CLIENTS = { "sk_live_4eC39HqLyjWDarjtT1zdp7dc" => Object.new, "alice@example.com:s3cr3t-pw" => Object.new }\n))
    plain = path("run_plain.pb.gz")
    named = path("run_named.pb.gz")
    _o, err, status = TestHelper.run_fathom("run", "--mode", "retention", "-o", plain, "--", RbConfig.ruby, script)
    assert status.success?, err
    refute_secrets Zlib.gunzip(File.binread(plain)), "fathom run --mode retention"
    _o, err, status = TestHelper.run_fathom("run", "--mode", "retention", "--string-contents", "-o", named, "--", RbConfig.ruby, script)
    assert status.success?, err
    assert Zlib.gunzip(File.binread(named)).include?("sk_live_4eC39HqLyjWDarjtT1zdp7dc".b), "--string-contents"

    _o, err, status = TestHelper.run_fathom("run", "--mode", "heap", "--string-contents", "--", RbConfig.ruby, script)
    refute status.success?
    assert_includes err, "--string-contents needs --mode retention"
  end

  def test_string_contents_is_checked_strictly
    [1, "true", nil, :yes].each do |bad|
      e = assert_raises(TypeError) { Fathom.retention_snapshot(progress: nil, string_contents: bad) }
      assert_includes e.message, "string_contents must be true or false"
      assert_raises(TypeError) { Fathom::RetentionProfiler.new(string_contents: bad) }
      assert_raises(TypeError) { Fathom::Native::RetentionSnapshot.new(64, bad) }
      assert_raises(TypeError) { Fathom.analyze_dump(path("heap.json"), string_contents: bad) } if Fathom::Native.respond_to?(:analyze_dump)
    end
  end

  def test_fathom_string_contents_env
    require "fathom/always_on/settings"
    old = ENV["FATHOM_STRING_CONTENTS"]
    ENV["FATHOM_STRING_CONTENTS"] = "maybe"
    e = assert_raises(ArgumentError) { Fathom::AlwaysOn::Settings.profilers(%i[retention], ENV) }
    assert_includes e.message, "FATHOM_STRING_CONTENTS"
    ENV["FATHOM_STRING_CONTENTS"] = "1"
    assert_equal({ string_contents: true }, Fathom::AlwaysOn::Settings.profilers(%i[retention], ENV))
    assert_equal({}, Fathom::AlwaysOn::Settings.profilers(%i[gc], ENV), "only retention takes it")
  ensure
    ENV["FATHOM_STRING_CONTENTS"] = old
  end
end
