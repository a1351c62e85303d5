# frozen_string_literal: true

require "test_helper"
require "support/importer_profile"

# `fathom report --by site|line|file|gem|class|function` and `--sort`, on
# hand-built profiles whose files are known (Report::Grouping, Frames,
# Gems). The same rows on real profiles: test/integration/csv_import_reports_test.rb.
class ReportRowsTest < Minitest::Test
  # How a report shortens the standard library's paths (built, so that it
  # is not read as a path of this repository's ext/fathom/ruby/).
  STDLIB_SHORT = %w[ruby 3.1.0].join("/")

  def setup
    skip_unless_protoc!
    @dir = Dir.mktmpdir("fathom-rows")
    @app = ImporterProfile.write_source(@dir)
  end

  def teardown
    FileUtils.rm_rf(@dir)
  end

  def profile
    ImporterProfile.text_profile(@app)
  end

  def top(by:, **opts)
    Fathom::Report::Top.new(Fathom::Pprof.decode(profile.gzipped), by: by, top: nil, **opts)
  end

  def rows(by, **opts)
    top(by: by, **opts).rows.to_h { |r| [r.name, [r.flat, r.cum]] }
  end

  def test_site_folds_c_methods_into_the_line_that_called_them
    sites = rows(:site)
    app = Fathom::Report::Gems.short_path(@app)
    assert_equal [3_000_000, 3_020_000], sites.fetch("Importer#run #{app}:12")
    # String#split (C) -> the stdlib line; Order.new through Integer#times (<internal:>) -> the app line.
    assert_equal [12_000, 12_000], sites.fetch("CSV::Parser#parse #{STDLIB_SHORT}/csv/parser.rb:876")
    assert_equal [8_000, 20_000], sites.fetch("Importer#parse #{app}:20")
    refute(sites.keys.any? { |k| k.start_with?("String#", "Order.new", "Integer#times") }, sites.keys.inspect)
    assert_equal "Importer#run #{app}:12", top(by: :site).rows.first.name
  end

  def test_line_rows_show_their_source
    text = top(by: :line).to_s
    app = Fathom::Report::Gems.short_path(@app)
    assert_match(/^\s+2929\.69kB\s+99\.34%.*  #{Regexp.escape(app)}:12  CACHE\[key\] = JSON\.generate\(rows\) \* 20$/, text)
    assert_match(/^Rows: lines \(the innermost Ruby line of each stack, with its source\)$/, text)
  end

  def test_file_gem_and_class_rows
    files = rows(:file)
    assert_equal [3_008_000, 3_020_000], files.fetch(Fathom::Report::Gems.short_path(@app))
    assert_equal [12_000, 12_000], files.fetch("#{STDLIB_SHORT}/csv/parser.rb")
    gems = rows(:gem, sample_index: "alloc_space")
    assert_equal({ "app" => [3_008_000, 3_024_500], "csv (stdlib)" => [16_000, 16_000], "activesupport" => [500, 500] }, gems)
    assert_equal({ "String" => [3_012_000, 3_012_000], "Order" => [8_000, 8_000] }, rows(:class))
    assert_equal({ "String#*" => [3_000_000, 3_000_000], "String#split" => [12_000, 12_000], "Order.new" => [8_000, 8_000],
                   "CSV::Parser#parse" => [0, 12_000], "Integer#times" => [0, 8_000], "Importer#parse" => [0, 20_000],
                   "Importer#run" => [0, 3_020_000], "<main>" => [0, 3_020_000] }, rows(:function))
  end

  def test_sort_by_cum
    names = top(by: :function, sort: :cum).rows.map(&:name)
    assert_equal %w[<main> Importer#run String#* Importer#parse], names.first(4)
    assert_match(/^Rows: functions, by cum$/, top(by: :function, sort: :cum).to_s)
  end

  def test_the_default_rows_per_kind
    heap = Fathom::Report.for_bytes(profile.gzipped).to_s
    assert_match(/^Rows: sites /, heap)
    assert_match(/Importer#run .*app\.rb:12$/, heap)
    assert_match(/^Rows: lines /, Fathom::Report.for_bytes(profile.gzipped, by: :line).to_s)
  end

  def test_gems_from_paths
    g = Fathom::Report::Gems
    {
      "/opt/fathom-gems/ruby/3.1.0/gems/activesupport-7.2.2/lib/active_support.rb" => "activesupport",
      "/usr/share/rubygems-integration/all/gems/net-http-0.4.1/lib/net/http.rb" => "net-http",
      "/home/u/.gem/ruby/3.3.0/gems/sqlite3-1.7.3-x86_64-linux/lib/sqlite3.rb" => "sqlite3",
      "/srv/app/vendor/bundle/ruby/3.3.0/bundler/gems/rails-1a2b3c4d5e6f/railties/lib/rails.rb" => "rails",
      "/usr/lib/ruby/3.1.0/csv/parser.rb" => "csv (stdlib)",
      "/opt/fathom-rubies/3.3.8/lib/ruby/3.3.0/json/common.rb" => "json (stdlib)",
      "/usr/lib/ruby/3.1.0/x86_64-linux-gnu/socket.rb" => "socket (stdlib)",
      "/usr/lib/ruby/vendor_ruby/rubygems/specification.rb" => "rubygems",
      "/opt/fathom-rubies/3.4.5/lib/ruby/gems/3.4.0/gems/csv-3.3.2/lib/csv.rb" => "csv",
      "/srv/app/app/models/order.rb" => "app",
      "-e" => "app",
      "/work/fathom/lib/fathom/report/top.rb" => "fathom",
      "<internal:gem_prelude>" => "ruby (core)",
      "<internal:/usr/lib/ruby/vendor_ruby/rubygems/core_ext/kernel_require.rb>" => "rubygems",
    }.each { |path, gem| assert_equal gem, g.of(path), path }
    assert_equal "activesupport-7.2.2/lib/active_support.rb",
                 g.short_path("/opt/fathom-gems/ruby/3.1.0/gems/activesupport-7.2.2/lib/active_support.rb")
    assert_equal "#{STDLIB_SHORT}/csv.rb", g.short_path("/usr/lib/ruby/3.1.0/csv.rb")
    assert_equal "app/models/order.rb", g.short_path("/srv/app/app/models/order.rb", "/srv/app")
  end

  # The Ruby API takes the same options as `fathom report`.
  def test_profile_report_takes_the_view
    profile = Fathom::Profile.new(self.profile.gzipped)
    assert_match(/^Rows: gems /, profile.report(by: :gem))
    assert_match(/^Filtered: focus CSV/, profile.report(focus: "CSV"))
    assert_raises(ArgumentError) { profile.report(by: :bogus) }
    e = assert_raises(ArgumentError) { profile.report(frobnicate: true) }
    assert_match(/fathom: unknown option :frobnicate for Fathom::Profile#report \(known: by, sort, focus/, e.message)
  end

  def test_by_is_checked
    assert_raises(ArgumentError) { Fathom::Report.for_bytes(profile.gzipped, by: :planet) }
    e = assert_raises(ArgumentError) { Fathom::Report::View.new(by: "planet", cli: true) }
    assert_match(/--by must be one of :function, :site, :line, :file, :gem, :class, got "planet"/, e.message)
    assert_raises(ArgumentError) { Fathom::Report.for_bytes(profile.gzipped, sort: :sideways) }
  end
end
