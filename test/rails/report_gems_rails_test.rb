# frozen_string_literal: true

require "test_helper"
require "support/rails_app"
require "support/cli_runner"

# Issue 43's acceptance: `fathom report --by gem` on a boot of the suite's
# Rails app (test/rails_app, `bin/rails runner nil` in production, so every
# class is loaded) names gems, the standard library and the app — for the
# memory the boot allocated (a heap profile: the gem of each allocating
# line, from its path) and for what it holds at the end (a retention
# snapshot: the library whose constant holds each object, derailed's
# `bundle:mem` question). One boot gives both files.
class ReportGemsRailsTest < Minitest::Test
  include CLIRunner

  def self.profiles(test)
    @profiles ||= begin
      dir = Dir.mktmpdir("fathom-rails-gems")
      base = File.join(dir, "boot")
      _, err, status = RailsApp.fathom_run(["--mode", "heap,retention", "-o", base], %w[runner nil])
      test.flunk("fathom run -- bin/rails runner nil failed:\n#{err}") unless status.success?
      { dir: dir, heap: "#{base}.heap.pb.gz", retention: "#{base}.retention.pb.gz" }
    end
  end

  Minitest.after_run { FileUtils.rm_rf(@profiles[:dir]) if @profiles }

  def setup
    require_native!
    RailsApp.require!(self)
    @p = self.class.profiles(self)
  end

  def report(*args)
    r = run_cli("report", *args)
    assert_equal 0, r.status, r.err
    r.out
  end

  # [[flat, name], ...] of a table's rows (the sampled table's samples and
  # interval columns skipped).
  def gem_rows(text)
    text.lines.filter_map do |l|
      m = /\A\s*(\S+)\s+\S+%\s+\S+%\s+\S+\s+\S+%\s+(?:\d+\??\s+\S+\s+)?(\S.*)\z/.match(l.chomp) or next
      [m[1], m[2]]
    end
  end

  # Allocated bytes of the boot by the library of the allocating line.
  # Each library below has hundreds to thousands of samples behind it in
  # this boot (activesupport ~1,900, railties ~300, the stdlib's uri ~120),
  # so none is missing but with a probability far below one in a million;
  # "app" is every stack's outermost frame (bin/rails), so always a row.
  def test_allocations_by_gem
    rows = gem_rows(report("--by", "gem", "--sample-index", "alloc_space", "--top", "200", @p[:heap]))
    names = rows.map(&:last)
    %w[activesupport railties actionpack activerecord].each { |gem| assert_includes names, gem, names.inspect }
    assert(names.any? { |n| n.end_with?(" (stdlib)") }, names.inspect)
    assert_includes names, "app"
    flat = rows.to_h { |f, n| [n, f] }
    assert_match(/[1-9]/, flat.fetch("activesupport"), "activesupport allocated at boot")
  end

  # What the booted app holds, by the library whose constant holds it:
  # deterministic (a snapshot counts every object).
  def test_retention_by_gem
    text = report("--by", "gem", "--top", "200", @p[:retention])
    rows = text.lines.filter_map { |l| /\A\s*(\S+)\s+\S+%\s+(\d+)  (\S+(?: \(stdlib\))?)/.match(l)&.captures }
    names = rows.map(&:last)
    %w[activesupport railties actionpack activerecord].each { |gem| assert_includes names, gem, text }
    assert(names.any? { |n| n.end_with?(" (stdlib)") }, text)
    app = rows.find { |_, _, n| n == "app" } or flunk(text)
    assert_operator app[1].to_i, :>, 0
    assert_match(/^\s+\S+\s+\S+%\s+\d+  app \(.*(Application|Shop|Product)/, text)
    refute_match(/  app \(Gem\b/, text, "Ruby's prelude's modules are not the app's")
    assert_match(/Ruby internals: compiled code, method caches/, text)
  end
end
