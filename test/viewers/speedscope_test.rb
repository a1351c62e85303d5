# frozen_string_literal: true

require "test_helper"
require "support/pprof_viewer"

# Fathom's pprof files opened in speedscope (the npm package's built app,
# pinned in test/viewers/package.json), served with the files from a local
# HTTP server and loaded by URL (index.html#profileURL=...), in headless
# Chromium: the demo's heap and retention profiles (examples/leaky_app.rb)
# and a CPU profile of examples/threaded_app.rb. speedscope draws its flame
# graphs on a canvas; test/viewers/pprof_view.js reads the names from its
# Sandwich table through its search box (see readSpeedscope there). Report:
# tmp/viewers/speedscope-view.json; screenshots
# tmp/viewers/speedscope-*-{sandwich,left-heavy}.png.
#
# speedscope shows one sample type per file, the file's default
# (inuse_space for a heap profile), with no way to pick another.
class SpeedscopeTest < Minitest::Test
  LEAKY_APP = File.join(TestHelper::ROOT, "examples/leaky_app.rb")
  THREADED_APP = File.join(TestHelper::ROOT, "examples/threaded_app.rb")
  BASE = File.join(PprofViewer::OUT_DIR, "speedscope-demo")
  CPU = File.join(PprofViewer::OUT_DIR, "speedscope-threads.cpu.pb.gz")
  SESSIONS = "SessionStore::SESSIONS (Hash)"
  FIND = {
    "heap" => ["block in <main>", "<main>"],
    "retention" => [SESSIONS],
    "cpu" => ["PageRenderer#render", "Garbage Collection"],
  }.freeze

  include PprofViewer::Reading

  def self.result
    BrowserRun.once(self) do
      heap = "#{BASE}.heap.pb.gz"
      retention = "#{BASE}.retention.pb.gz"
      PprofViewer.fathom_run("--mode", "heap,retention", "--interval", "0.5ms", "-o", BASE, app: LEAKY_APP,
                                                                                          outputs: [heap, retention])
      PprofViewer.fathom_run("--mode", "cpu", "-o", CPU, app: THREADED_APP, outputs: [CPU])
      files = { "heap" => heap, "retention" => retention, "cpu" => CPU }
      pages = files.map do |kind, file|
        { "name" => "speedscope-#{kind}", "kind" => "speedscope", "profile" => file, "find" => FIND.fetch(kind) }
      end
      PprofViewer.inspect(pages, name: "speedscope")
    end
  end

  def setup
    require_native!
    PprofViewer.require!(self, needs: %i[speedscope])
    @view = self.class.result
  end

  # The rows speedscope's search left for `query` whose name is `name`.
  def found(kind, query, name = query)
    rows = page("speedscope-#{kind}")["found"].fetch(query)
    rows.select { |r| block_given? ? yield(r["name"]) : r["name"] == name }
  end

  def test_every_file_loads_without_errors
    FIND.each_key do |kind|
      p = page("speedscope-#{kind}")
      assert_equal 200, p["status"]
      assert_empty p["page_errors"], "#{kind}: page errors"
      assert_empty p["console_errors"], "#{kind}: console errors"
      assert_empty p["failed_requests"], "#{kind}: failed requests"
      refute_empty p["rows"], "#{kind}: the sandwich table is empty"
      assert_match(/\Aspeedscope-.*\.pb\.gz - speedscope\z/, p["title"])
      p["screenshots"].each { |png| assert File.size?(png), png }
    end
  end

  def test_ruby_names_are_intact
    FIND.each do |kind, names|
      names.each do |name|
        next if name == SESSIONS

        refute_empty found(kind, name), "#{kind}: no row named #{name.inspect}; the search left " \
                                        "#{page("speedscope-#{kind}")["found"][name].map { |r| r["name"] }}"
      end
      refute page("speedscope-#{kind}")["rows"].any? { |r| r["name"].include?("[ruby]") }, kind
    end
    # The leak's Hash, a frame of its own in the retention profile's chains.
    refute_empty found("retention", SESSIONS) { |n| n.end_with?("→ #{SESSIONS}") }
  end

  # Weights in the file's units: bytes for memory, time for CPU.
  def test_weights_are_shown_in_the_files_units
    heap = found("heap", "<main>").first["total"]
    assert_match(/\A\d+(\.\d+)? (B|KB|MB|GB) \(/, heap, "<main>'s total in the heap profile")
    cpu = found("cpu", "PageRenderer#render").first["total"]
    assert_match(/\A\d+(\.\d+)?(ns|µs|us|ms|s) \(/, cpu, "PageRenderer#render's total in the CPU profile")
  end
end
