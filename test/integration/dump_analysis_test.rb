# frozen_string_literal: true

require "test_helper"
require "open3"
require "support/pprof_raw"

# `fathom analyze` and Fathom.analyze_dump on real ObjectSpace.dump_all files
# written by test/fixtures/dump_script.rb, read back with go tool pprof.
class DumpAnalysisTest < Minitest::Test
  SCRIPT = File.expand_path("../fixtures/dump_script.rb", __dir__)

  def setup
    require_native!
    skip_unless_go!
    @dir = Dir.mktmpdir("fathom-dump")
  end

  def teardown
    FileUtils.rm_rf(@dir)
  end

  def make_dumps(mode)
    _o, err, status = Open3.capture3(TestHelper::PLAIN_ENV, RbConfig.ruby, "-I#{TestHelper::LIB}", SCRIPT, mode, @dir)
    assert status.success?, err
  end

  # Acceptance: the top retainer and its retained size match the in-process
  # snapshot of the same heap within 5%; the chain is Hash -> Session -> String.
  def test_equivalence_with_the_in_process_snapshot
    make_dumps("leak")
    out = File.join(@dir, "dump.pb.gz")
    profile = Fathom.analyze_dump(File.join(@dir, "leak.json"), out: out)
    assert_equal :retention, profile.kind
    dump = PprofRaw.read(out)
    snap = PprofRaw.read(File.join(@dir, "snapshot.pb.gz"))
    assert_equal snap.sample_types, dump.sample_types

    # The top Hash retainer. (The top retainer overall may be the module
    # LeakFixture: a dump shows no inline constant cache holding the hash, so
    # the module dominates it and the hook's rows.)
    retained = dump.index_of("retained_space")
    top = dump.samples.select { |s| s.functions.first.end_with?("(Hash)") }.max_by { |s| s.values[retained] }
    assert_match(/LeakFixture::Registry/, top.functions.reverse.join(" | "), "top Hash retainer")
    snap_retained = snap.index_of("retained_space")
    snap_top = snap.samples.select { |s| s.functions.first.match?(/LeakFixture::Registry::SESSIONS \(Hash\)\z/) }
                   .max_by { |s| s.values[snap_retained] }
    refute_nil snap_top, "the snapshot's sessions hash"
    want = snap_top.values[snap_retained]
    assert_in_delta want, top.values[retained], want * 0.05, "retained size of the sessions hash"

    # The payload strings' chain: Hash -> Session -> String, named as far as
    # the dump allows; by default without the strings' values.
    objects = dump.index_of("inuse_objects")
    payload = dump.samples.select { |s| s.functions.first == "via LeakFixture::Session (String)" }
                  .max_by { |s| s.values[objects] }
    refute_nil payload, dump.output[0, 2000]
    chain = payload.functions.reverse
    assert_match(/\(Hash\)\z/, chain[-3])
    assert_equal "via Hash (LeakFixture::Session)", chain[-2]
    assert_in_delta 2000, payload.values[objects], 5
    refute_includes dump.output, "pppp", "no string's value by default"
    assert_equal false, profile.stats[:string_contents]

    # string_contents: true names strings by the start of their value.
    named_out = File.join(@dir, "named.pb.gz")
    named = Fathom.analyze_dump(File.join(@dir, "leak.json"), out: named_out, string_contents: true)
    assert_equal true, named.stats[:string_contents]
    named_dump = PprofRaw.read(named_out)
    named_payload = named_dump.samples.select { |s| s.functions.first.include?("pppp") }.max_by { |s| s.values[objects] }
    refute_nil named_payload, named_dump.output[0, 2000]
    assert_equal "via LeakFixture::Session \"pppppppppppppppp…\" (String)", named_payload.functions.first
    assert_in_delta 2000, named_payload.values[objects], 5

    # Allocation tracing was on: sites and generations.
    sites = profile.stats[:sites]
    refute_nil sites
    assert(sites.any? { |key, n, _| key.end_with?("leak_fixture.rb:14") && n >= 2000 }, sites.inspect)
    refute_empty profile.stats[:generations]

    # Gzipped dumps read the same.
    gz = Fathom.analyze_dump(File.join(@dir, "leak.json.gz"))
    assert gz.stats[:gzipped]
    assert_equal profile.stats[:reachable_bytes], gz.stats[:reachable_bytes]
  end

  def test_cli_prints_the_report_and_the_tables
    make_dumps("leak")
    out = File.join(@dir, "cli.pb.gz")
    stdout, err, status = TestHelper.run_fathom("analyze", File.join(@dir, "leak.json"), "-o", out, "--top", "5",
                                                env: TestHelper::PLAIN_ENV)
    assert status.success?, err
    assert_match(/\(LeakFixture::Session\)/, stdout)
    assert_match(/Names unavailable in a heap dump: instance variable/, stdout)
    assert_match(/Live by allocation site:/, stdout)
    assert_match(/leak_fixture\.rb:14/, stdout)
    assert_match(/Live by generation/, stdout)
    assert File.file?(out)
    report, = TestHelper.run_fathom("report", out, env: TestHelper::PLAIN_ENV)
    assert_equal stdout.lines.first, report.lines.first
  end

  # Acceptance: the three-dump technique finds the leaking site, and
  # nothing in a program that does not leak.
  def test_three_dump_diff
    make_dumps("leaky")
    dumps = %w[a b c].map { |n| File.join(@dir, "#{n}.json") }
    stdout, err, status = TestHelper.run_fathom("analyze", "--diff", *dumps, env: TestHelper::PLAIN_ENV)
    assert status.success?, err
    leak_line = File.readlines(SCRIPT).index { |l| l.include?("# LEAK SITE") } + 1
    site_rows = stdout[/New by allocation site:\n.*?\n\n/m].to_s
    assert_match(/\A.*\n.*\n\s*\S+\s+200  \S*dump_script\.rb:#{leak_line}\n/, site_rows, stdout)
    assert_match(/global_tbl.*\(Array\)/, stdout[/New by dominator path.*/m].to_s, stdout)

    diff = Fathom::Profilers::DumpAnalysis.diff(dumps)
    top_site = diff[:by_site].first
    assert_equal 200, top_site[1]

    FileUtils.rm_f(Dir[File.join(@dir, "*.json")])
    make_dumps("steady")
    diff = Fathom::Profilers::DumpAnalysis.diff(dumps)
    # What survives is the dumping's own bookkeeping (an object or two on
    # the C stack), never the churn: 500 strings per step.
    churn_line = File.readlines(SCRIPT).index { |l| l.include?("# CHURN SITE") } + 1
    refute(diff[:by_site].any? { |key, _, _| key.end_with?("dump_script.rb:#{churn_line}") }, diff.inspect)
    assert_operator diff[:new_objects], :<, 10, diff.inspect
  end

  def write(name, text)
    path = File.join(@dir, name)
    File.binwrite(path, text)
    path
  end

  ROOT = %({"type":"ROOT", "root":"vm", "references":["0x10"]}\n)
  OBJ = %({"address":"0x10", "type":"STRING", "class":"0x20", "memsize":40}\n)

  # Bad input: exit 1 with the file and line; never a crash.
  def test_bad_dumps_are_clear_errors
    cases = {
      "empty.json" => ["", /empty file/],
      "noroot.json" => [OBJ, /no ROOT records/],
      "trunc.json" => [ROOT + OBJ[0, 30], /line 2: truncated last line/],
      "notjson.json" => [ROOT + "hello\n" + OBJ, /line 2: not a JSON line/],
      "type.json" => [ROOT + OBJ.sub("STRING", "GADGET"), /line 2: unknown type "GADGET"/],
      "gzip.json.gz" => [TestHelper.gzip(ROOT + OBJ * 100)[0, 40] + "garbage" * 10, /gzip error/],
    }
    cases.each do |name, (text, message)|
      path = write(name, text)
      _o, err, status = TestHelper.run_fathom("analyze", path, env: TestHelper::PLAIN_ENV)
      assert_equal 1, status.exitstatus, "#{name}: #{err}"
      assert_match(/\Afathom analyze: #{Regexp.escape(path)}: .*#{message.source}/, err, name)
      assert_raises(Fathom::Error) { Fathom.analyze_dump(path) }
    end
    dangling = write("dangling.json", ROOT + OBJ.sub('"memsize"', '"references":["0x99"], "memsize"'))
    stdout, err, status = TestHelper.run_fathom("analyze", dangling, env: TestHelper::PLAIN_ENV)
    assert status.success?, err
    assert_match(/Dangling references \(to addresses not in the dump\): 1/, stdout)
    _o, err, status = TestHelper.run_fathom("analyze", env: TestHelper::PLAIN_ENV)
    assert_equal 2, status.exitstatus, err
    _o, err, status = TestHelper.run_fathom("analyze", "--diff", dangling, env: TestHelper::PLAIN_ENV)
    assert_equal 2, status.exitstatus, err
  end
end
