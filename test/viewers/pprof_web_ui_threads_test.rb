# frozen_string_literal: true

require "test_helper"
require "support/pprof_viewer"
require "support/pprof_raw"

# A CPU and a wall profile of examples/threaded_app.rb (two web threads
# rendering pages, a compressor in libz, a sleeper) opened in pprof's web
# UI in headless Chromium (test/viewers/pprof_view.js; report:
# tmp/viewers/pprof-threads-view.json, screenshots tmp/viewers/pprof-{cpu,wall}-*.png).
# Thread names are sample labels ("thread name"): the graph hangs them under
# each function as label boxes, and `go tool pprof -http=: -tagroot='thread
# name' FILE` makes them the flame graph's first frames (Go 1.19's UI takes
# tagroot only as a flag, not in its URLs: a second server per file does).
class PprofWebUiThreadsTest < Minitest::Test
  APP = File.join(TestHelper::ROOT, "examples/threaded_app.rb")
  OUT = PprofViewer::OUT_DIR
  MODES = %w[cpu wall].freeze
  PAGES = PprofViewer::WEB_UI_PAGES
  # The threads that burn CPU (the sleeper only sleeps: wall time, no CPU).
  CPU_THREADS = %w[web-1 web-2 compressor].freeze

  include PprofViewer::Reading

  def self.result
    BrowserRun.once(self) do
      files = MODES.map do |mode|
        file = File.join(OUT, "pprof-threads.#{mode}.pb.gz")
        PprofViewer.fathom_run("--mode", mode, "-o", file, app: APP, outputs: [file])
        file
      end
      by_thread = files.map { |f| [f, "-tagroot=thread name"] }
      PprofViewer.serve(*files, *by_thread) do |*bases|
        pages = PprofViewer.web_ui_pages(MODES, bases)
        pages += MODES.zip(bases.drop(MODES.size)).map do |mode, base|
          { "name" => "pprof-#{mode}-threads", "kind" => "flamegraph", "url" => "#{base}/ui/flamegraph" }
        end
        PprofViewer.inspect(pages, name: "pprof-threads")
      end
    end
  end

  def setup
    require_native!
    PprofViewer.require!(self, needs: %i[pprof])
    @view = self.class.result
  end

  def test_every_page_loads_without_errors
    MODES.product([*PAGES.keys, "threads"]).each { |mode, name| assert_clean_page("pprof-#{mode}-#{name}") }
    MODES.each do |mode|
      refute_includes page("pprof-#{mode}-graph")["text"], "Could not execute dot"
      assert_operator page("pprof-#{mode}-graph")["svg_count"], :>=, 1, "#{mode}: graph svg"
    end
  end

  # The top table lists every function the file's samples hold above 1% of
  # the total (read back with `go tool pprof -raw`; pprof itself drops nodes
  # at or below 0.5%), and nothing else: deterministic. The fixed names are the work
  # that dominates: each is on at least ~14% of ~120 CPU samples (10 ms
  # each), so a profile without one has a chance below 0.86^120 (2e-8).
  # SessionStore.remember is not named: it is on ~1% of CPU samples (often
  # one sample, at times none).
  def test_the_work_is_shown_by_its_ruby_names
    MODES.each do |mode|
      raw = PprofRaw.read(File.join(OUT, "pprof-threads.#{mode}.pb.gz"))
      shown = top_names("pprof-#{mode}-top")
      assert_empty raw.functions_above(0.01) - shown, "#{mode} top: functions above 1% of the file's total not shown"
      assert_empty shown - raw.function_names, "#{mode} top: rows for functions the file does not hold"
      ["PageRenderer#render", "Zlib::Deflate.deflate", "Garbage Collection"].each do |name|
        assert_includes top_names("pprof-#{mode}-top"), name, "#{mode} top"
      end
      assert_includes flame_labels("pprof-#{mode}-flamegraph"), "PageRenderer#render", "#{mode} flame graph"
      assert_includes flame_labels("pprof-#{mode}-flamegraph"), "block (2 levels) in <main>", "#{mode} flame graph"
      refute_includes page("pprof-#{mode}-top")["text"], "[ruby]"
    end
    # Only the wall profile sees the sleeper's and the main thread's waits.
    # Kernel#sleep on every Ruby: 3.3 read Kernel.sleep under `fathom run`
    # while exit! was intercepted with Kernel.prepend (lib/fathom/autorun.rb).
    assert_includes top_names("pprof-wall-top"), "Kernel#sleep"
    assert_includes top_names("pprof-wall-top"), "Thread#join"
  end

  def test_times_are_shown_as_durations
    MODES.each do |mode|
      row = page("pprof-#{mode}-top")["rows"].find { |r| r["name"] == "PageRenderer#render" }
      assert_match(/\A\d+(\.\d+)?(ns|us|µs|ms|s)\z/, row["cum"], "#{mode}: PageRenderer#render's cum")
    end
  end

  def test_thread_names_are_shown
    MODES.each do |mode|
      roots = flame_labels("pprof-#{mode}-threads")
      CPU_THREADS.each { |t| assert_includes roots, t, "#{mode} flame graph by thread name" }
      lines = graph_lines("pprof-#{mode}-graph")
      %w[web-1 web-2].each { |t| assert_includes lines, "thread name:#{t}", "#{mode} graph's label boxes" }
    end
    %w[main sleeper].each { |t| assert_includes flame_labels("pprof-wall-threads"), t, "wall flame graph by thread name" }
  end
end
