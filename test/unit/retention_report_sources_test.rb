# frozen_string_literal: true

require "test_helper"

# What a retention snapshot records for `fathom report --by gem` and
# `--strings` (ConstantSources, StringCensus), in this process. The same
# on real snapshots: test/integration/csv_import_reports_test.rb and
# test/rails/report_gems_rails_test.rb.
class RetentionReportSourcesTest < Minitest::Test
  def setup
    @dir = Dir.mktmpdir("fathom-sources")
  end

  def teardown
    FileUtils.rm_rf(@dir)
  end

  # A module a gem defines, a class under it from the same gem, and one
  # the app adds to the gem's namespace.
  def test_the_library_of_each_namespace
    gem_dir = File.join(@dir, "vendor/gems/fakegem-1.2.0/lib")
    FileUtils.mkdir_p(gem_dir)
    File.write(File.join(gem_dir, "fakegem.rb"), "module FakeGemProbe\n  class Inner\n  end\nend\n")
    File.write(File.join(@dir, "app_ext.rb"), "module FakeGemProbe\n  class AppAddition\n  end\nend\n")
    load File.join(gem_dir, "fakegem.rb")
    load File.join(@dir, "app_ext.rb")
    table = Fathom::ConstantSources.table
    assert_equal "fakegem", table["FakeGemProbe"]
    refute table.key?("FakeGemProbe::Inner"), "the same library as its namespace: not repeated"
    assert_equal "app", table["FakeGemProbe::AppAddition"]
    assert_equal "ruby (core)", table["String"]
    # Set up by Ruby's prelude (const_source_location gives line 0): Ruby's own, not the app's.
    assert_equal "ruby (core)", table["Process"]
    assert_equal "ruby (core)", table["Gem"] unless table["Gem"] == "rubygems"
    parsed = Fathom::ConstantSources.parse(Fathom::ConstantSources.comments)
    assert_equal "fakegem", Fathom::ConstantSources.lookup(parsed, "FakeGemProbe::Inner::CACHE")
    assert_equal "app", Fathom::ConstantSources.lookup(parsed, "FakeGemProbe::AppAddition")
    assert_nil Fathom::ConstantSources.lookup(parsed, "NoSuchNamespace::X")
    assert(Fathom::ConstantSources.comments.all? { |c| c.start_with?("fathom.constants ") && !c.include?("\n") })
  ensure
    Object.send(:remove_const, :FakeGemProbe) if defined?(FakeGemProbe)
  end

  def test_the_string_census_keeps_contents_out_unless_asked
    probe = "census-probe-#{Process.pid}-#{rand(1 << 30)}"
    copies = Array.new(500) { probe.dup }
    _, groups = Fathom::StringCensus.parse(Fathom::StringCensus.comments)
    mine = groups.find { |g| g[:copies] >= 500 && g[:length] == probe.bytesize } or flunk(groups.inspect)
    assert_equal format("%04x", Fathom::StringCensus.hash16(probe)), mine[:hash]
    refute mine.key?(:value)
    comments = Fathom::StringCensus.comments(string_contents: true)
    refute(comments.none? { |c| c.include?(probe) })
    _, groups = Fathom::StringCensus.parse(comments)
    assert(groups.any? { |g| g[:value] == probe && g[:copies] >= 500 })
    copies.clear
  end

  # The census's short hash is the one a String hash key's shape shows
  # (core/retention/key_shape.cc: FNV-1a 32 bits, xor-folded to 16).
  def test_the_short_hash_is_the_key_shapes
    # The values core/retention/key_shape_test.cc pins.
    assert_equal 0x1cd9, Fathom::StringCensus.hash16("")
    assert_equal 0xcd20, Fathom::StringCensus.hash16("a")
    assert_equal 0x8bcd, Fathom::StringCensus.hash16("sk_live_4eC39HqLyjWDarjtT1zdp7dc")
    assert_equal 0xf177, Fathom::StringCensus.hash16("alice@example.com:s3cr3t-pw")
    refute_equal Fathom::StringCensus.hash16("widget"), Fathom::StringCensus.hash16("gadget")
  end

  # With the heap profiler of the same run (exact), each group names the
  # lines that allocated its copies.
  def test_sites_from_the_heap_profiler
    require_native!
    profiler = Fathom::HeapProfiler.new(exact: true).start
    probe = "site-probe-#{rand(1 << 30)}"
    copies = Array.new(300) { probe.dup } # this line allocates them
    line = __LINE__ - 1
    comments = Fathom::StringCensus.comments(heap_profiler: profiler)
    total, groups = Fathom::StringCensus.parse(comments)
    assert_equal "exact", total[:sites]
    mine = groups.find { |g| g[:copies] >= 300 && g[:length] == probe.bytesize } or flunk(groups.inspect)
    site, count = mine[:sites].first
    assert_match(/#{Regexp.escape(File.basename(__FILE__))}:#{line}\z/, site)
    assert_equal 300, count
    copies.clear
  ensure
    profiler&.stop
  end
end
