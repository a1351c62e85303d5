# frozen_string_literal: true

require "test_helper"
require "support/pprof_viewer"

# The demo's profiles (script/demo: examples/leaky_app.rb under `fathom run
# --mode heap,gc,retention --interval 0.5ms`) opened in pprof's web UI as
# the demo tells a person to (`go tool pprof -http=: tmp/demo.heap.pb.gz`):
# the graph (/ui/, drawn by Graphviz's dot), top (/ui/top) and flame graph
# (/ui/flamegraph) pages of each, read in headless Chromium by
# test/viewers/pprof_view.js (report: tmp/viewers/pprof-demo-view.json,
# screenshots tmp/viewers/pprof-{heap,retention,gc}-*.png). One fathom run,
# one pprof server per file and one browser run serve every test here.
class PprofWebUiDemoTest < Minitest::Test
  APP = File.join(TestHelper::ROOT, "examples/leaky_app.rb")
  BASE = File.join(PprofViewer::OUT_DIR, "pprof-demo")
  KINDS = %w[heap retention gc].freeze
  PAGES = PprofViewer::WEB_UI_PAGES
  SESSIONS = "SessionStore::SESSIONS (Hash)"

  include PprofViewer::Reading

  def self.result
    BrowserRun.once(self) do
      files = KINDS.map { |k| "#{BASE}.#{k}.pb.gz" }
      PprofViewer.fathom_run("--mode", "heap,gc,retention", "--interval", "0.5ms", "-o", BASE, app: APP, outputs: files)
      PprofViewer.serve(*files) do |*bases|
        PprofViewer.inspect(PprofViewer.web_ui_pages(KINDS, bases), name: "pprof-demo")
      end
    end
  end

  def setup
    require_native!
    PprofViewer.require!(self, needs: %i[pprof])
    @view = self.class.result
  end

  def test_every_page_loads_without_errors
    KINDS.product(PAGES.keys).each { |kind, view| assert_clean_page("pprof-#{kind}-#{view}") }
  end

  # Graphviz installed: the graph page is dot's svg, not pprof's 501 "Could
  # not execute dot; may need to install graphviz."
  def test_graph_pages_draw_an_svg
    KINDS.each do |kind|
      p = page("pprof-#{kind}-graph")
      refute_includes p["text"], "Could not execute dot", kind
      assert_operator p["svg_count"], :>=, 1, "#{kind}: no svg"
      refute_empty p["nodes"], "#{kind}: the svg has no nodes"
    end
    assert_includes graph_lines("pprof-heap-graph"), "block in <main>"
    assert_includes graph_lines("pprof-gc-graph"), "Garbage Collection"
  end

  # The names Ruby gives, as Ruby spells them: pprof's symbolizer once turned
  # "<main>" into "[ruby]" (files carried a Function.system_name).
  def test_heap_profile_shows_ruby_names_intact
    ["<main>", "block in <main>", "SessionStore.remember", "Session#initialize"].each do |name|
      assert_includes top_names("pprof-heap-top"), name, "top"
      assert_includes flame_labels("pprof-heap-flamegraph"), name, "flame graph labels shown"
    end
    %w[top flamegraph graph].each do |view|
      refute_includes page("pprof-heap-#{view}")["text"], "[ruby]", view
    end
  end

  def test_heap_profile_shows_bytes
    assert_match(/inuse_space/, page("pprof-heap-top")["title"], "the default sample type")
    cum = page("pprof-heap-top")["rows"].find { |r| r["name"] == "<main>" }["cum"]
    assert_match(/\A\d+(\.\d+)?[kMG]?B\z/, cum, "<main>'s cum in the top table")
  end

  # The retention profile's stacks are reference chains from the GC roots:
  # the leak's Hash is a frame of its own, named by its constant.
  def test_retention_profile_shows_the_leaking_hash
    top = top_names("pprof-retention-top")
    assert top.any? { |n| n.include?(SESSIONS) }, "top: #{top.first(10)}"
    flame = flame_labels("pprof-retention-flamegraph")
    assert flame.any? { |n| n.include?(SESSIONS) }, "flame graph labels shown: #{flame.first(20)}"
  end

  def test_gc_profile_shows_garbage_collection
    top = page("pprof-gc-top")["rows"]
    gc = top.find { |r| r["name"] == "Garbage Collection" } or flunk("top: #{top}")
    assert_match(/\A\d+(\.\d+)?(ns|us|µs|ms|s)\z/, gc["flat"], "GC time in the top table")
    assert_includes flame_labels("pprof-gc-flamegraph"), "Garbage Collection"
  end
end
