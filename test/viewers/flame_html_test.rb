# frozen_string_literal: true

require "test_helper"
require "support/browser_run"

# The flame graph `fathom report FILE --format html -o flame.html` writes:
# one file, opened from disk in headless Chromium with every request but
# the file itself refused (test/viewers/flame_html_view.js). The frames it
# draws are DOM text, so the test reads the names a person sees: the CSV
# import's leak (test/fixtures/csv_import.rb, exact mode) under the methods
# that led to it, the search box marking it, a click zooming into it.
# Screenshots: tmp/viewers/flame-html*.png.
class FlameHtmlTest < Minitest::Test
  APP = File.join(TestHelper::ROOT, "test/fixtures/csv_import.rb")
  SCRIPT = File.join(BrowserRun::ROOT, "test/viewers/flame_html_view.js")
  OUT_DIR = File.join(BrowserRun::ROOT, "tmp/viewers")

  def self.result
    BrowserRun.once(self) do
      FileUtils.mkdir_p(OUT_DIR)
      profile = File.join(OUT_DIR, "flame-csv-import.pb.gz")
      html = File.join(OUT_DIR, "flame-csv-import.html")
      FileUtils.rm_f([profile, html])
      env = TestHelper::PLAIN_ENV.merge("CSV_IMPORT_ROWS" => "3000")
      _, err, status = TestHelper.run_fathom("run", "--mode", "heap", "--exact", "-o", profile, "--", RbConfig.ruby, APP, env: env)
      raise "fathom run failed: #{err}" unless status.success?

      _, err, status = TestHelper.run_fathom("report", profile, "--format", "html", "-o", html)
      raise "fathom report --format html failed: #{err}" unless status.success?

      report = BrowserRun.run(SCRIPT, { "file" => html, "search" => "SummaryCache", "zoom" => "CsvImport.report" },
                              timeout: 90, keep: File.join(OUT_DIR, "flame-html.json"))
      report.merge("html" => html)
    end
  end

  def setup
    require_native!
    reason = BrowserRun.skip_reason
    BrowserRun.skip_or_flunk(self, reason) if reason
    @view = self.class.result
  end

  def test_one_file_and_nothing_fetched
    html = File.read(@view["html"])
    refute_match(%r{<(script|link|img)[^>]+(src|href)=}i, html, "no external resource")
    assert_equal [], @view["blocked"], "the page asked the network for nothing"
    assert_equal [File.realpath(@view["html"])], @view["requests"].map { |u| u.delete_prefix("file://") }.uniq
    assert_empty @view["page_errors"]
    assert_empty @view["console_errors"]
    assert_equal "flame-csv-import.pb.gz - Fathom flame graph", @view["title"]
  end

  def test_the_frames_a_person_reads
    names = @view["names"]
    ["(all)", "<main>", "CsvImport.run", "CsvImport.report", "CsvImport::SummaryCache.fetch", "String#*"].each do |name|
      assert_includes names, name
    end
    assert_match(/\Ainuse_space: [\d.]+MB total\z/, @view["summary"])
    assert_equal %w[inuse_space alloc_space inuse_objects alloc_objects].sort, @view["types"].sort
  end

  def test_search_and_zoom
    # The leak goes through SummaryCache.fetch: most of the in-use bytes.
    share = @view["found"][/\((\d+\.\d+)%\)/, 1].to_f
    assert_operator share, :>, 50, @view["found"]
    assert_operator @view["matched"], :>, 0
    assert @view["zoom_clicked"], "a frame named CsvImport.report to click"
    assert_match(/Reset zoom.*CsvImport\.report/, @view["crumbs"])
    assert_equal "CsvImport.report", @view["zoomed_names"].first
    refute_includes @view["zoomed_names"], "CsvImport.parse"
    @view["screenshots"].each { |png| assert File.size?(png), png }
  end
end
