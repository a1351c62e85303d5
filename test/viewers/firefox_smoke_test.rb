# frozen_string_literal: true

require "test_helper"
require "json"
require "zlib"
require "support/firefox_viewer"

# What a user sees when they open `fathom run --mode cpu,gc,heap --format
# firefox` output in the Firefox Profiler: the real web app
# (shared/viewers/firefox-profiler) in headless Chromium, driven by
# test/viewers/firefox_view.js (its report is kept in tmp/viewers/app-view.json,
# with the screenshots). One profile of examples/threaded_app.rb and one
# browser run serve every test here (about 15 s in all).
class FirefoxViewerSmokeTest < Minitest::Test
  OUT = File.join(TestHelper::ROOT, "tmp/viewers/app.json.gz")
  APP = File.join(TestHelper::ROOT, "examples/threaded_app.rb")
  # The threads examples/threaded_app.rb names that burn CPU, so that a CPU
  # profile holds them (main for its ~50 ms warm-up: >= 3 ticks of its CPU
  # clock); its "sleeper" only sleeps (a CPU profile has no track for it;
  # test/viewers/firefox_thread_states_test.rb opens a wall profile with a
  # sleeper).
  CPU_THREADS = %w[main web-1 web-2 compressor].freeze
  GC_TRACK = "Garbage Collection"

  include FirefoxViewer::Reading

  def self.result
    BrowserRun.once(self) do
      FirefoxViewer.profile_and_view(OUT, name: "app") do
        _o, err, status = TestHelper.run_fathom("run", "--mode", "cpu,gc,heap", "--format", "firefox", "-o", OUT,
                                                "--", RbConfig.ruby, APP, env: TestHelper::PLAIN_ENV)
        raise "fathom run failed (#{status.exitstatus}): #{err}" unless status.success? && File.exist?(OUT)
      end
    end
  end

  def setup
    require_native!
    FirefoxViewer.require!(self)
    @file_threads, @view = self.class.result
  end

  def test_one_track_per_thread_the_file_holds
    CPU_THREADS.each { |name| assert_includes file_names, name, "threaded_app's #{name} thread" }
    assert_includes file_names, GC_TRACK, "cpu,gc,heap writes a GC track"
    shown = @view["tracks"].map { |t| t["name"] }
    assert_equal file_names.sort, shown.sort,
                 "one track per thread in the file (hidden by the app: #{@view["hidden_tracks"]}; " \
                 "menu: #{@view["track_count_text"]})"
    assert_empty @view["hidden_tracks"], "tracks the app hid"
    # Each track shows the thread of its name (the track's name is the page's
    # label; thread_index is the thread the app selects when it is clicked).
    @file_threads.each do |t|
      assert_equal t["index"], track(t["name"])["thread_index"], "track #{t["name"]}"
    end
    assert track("main")["global"], "main is the process's own track"
  end

  # The profiler hatches the stretch of a track before its first sample
  # with "This buffer was empty… increase your buffer size" unless the
  # thread's registerTime says when it began (core/cpu/cpu_firefox.cc).
  # The app still draws a 0-px EmptyBuffer block when the first sample sits
  # exactly at registerTime: only a visible one counts.
  def test_no_empty_buffer_hatch_over_sampled_time
    @view["tracks"].each do |t|
      hatch = t["empty_regions"].select { |r| r["kind"] == "EmptyBuffer" && r["width_px"] > 0 }
      assert_empty hatch, "#{t["name"]}: #{t["empty_regions"]}"
    end
  end

  def test_the_page_reports_no_errors
    assert_match(/\AFathom cpu\+gc\+heap profile/, @view["title"])
    assert_empty @view["page_errors"], "page errors"
    assert_empty @view["console_errors"], "console errors"
    assert_empty @view["failed_requests"], "failed requests"
    @view["screenshots"].each { |png| assert File.size?(png), png }
  end

  # The expanded call tree of each web thread shows every function on the
  # file's sampled stacks for it (FirefoxViewer.sampled_functions): that is
  # deterministic. Of fixed names only PageRenderer#render is asserted, in
  # either web thread: it is on 36-57% of each one's 40-50 samples, so a
  # profile without it has a chance below 0.64^80 (3e-16), 0.64^40 (2e-8)
  # with half the CPU. SessionStore.remember is on 1-3% (one sample or
  # none: a fresh clone's CI once had none), so it is checked only through
  # the file.
  def test_call_trees_and_sidebar_show_the_work
    %w[web-1 web-2].each do |name|
      view = thread_view(name)
      shown = view["calltree_rows"].map { |r| r["name"] }.uniq
      wanted = FirefoxViewer.sampled_functions(OUT, file_thread(name)["index"])
      assert_empty wanted - shown, "#{name}: functions the file's samples hold that the call tree does not show"
    end
    assert(%w[web-1 web-2].any? { |name| thread_view(name)["calltree_text"].include?("PageRenderer#render") },
           "PageRenderer#render in neither web thread's call tree")
    web = thread_view("web-1")
    assert_match(/Ruby \(running\) \d/, web["sidebar_text"])
    assert_operator track("web-1")["activity_pixels"], :>, 0
    comp = thread_view("compressor")
    assert_includes comp["calltree_text"], "Zlib::Deflate.deflate"
    gc = thread_view(GC_TRACK)
    assert_match(/^Garbage Collection/, gc["calltree_text"])
    assert_match(/GC 100%/, gc["sidebar_text"])
    assert_operator track(GC_TRACK)["activity_pixels"], :>, 0
  end

  # The "JS Allocations" call tree of a thread: the allocating stacks by
  # bytes, each ending in its class ("new String"): the profiler shows the
  # allocations' className nowhere else. A second browser run, on the same
  # file, after the first one (result) made it.
  def test_allocation_call_tree_names_the_classes
    self.class.result
    view = BrowserRun.once(AllocationsView) do
      FirefoxViewer.inspect(OUT, threads: ["web-1"], ct_summary: "js-allocations", name: "app-allocations")
    end
    web = view["threads"].values.first or flunk("no call tree read: #{view.keys}")
    text = web["calltree_text"]
    assert_includes text, "PageRenderer#render"
    assert_match(/^ *new String  \[/, text, "the allocations' classes as leaf frames")
    assert_empty view["page_errors"], "page errors"
  end

  # Holds the memo of the allocations view (BrowserRun.once keys on a class).
  class AllocationsView; end

  # The compressor spends its time in libz with the GVL released: that is
  # CPU work, so its activity graph must not be empty (its samples were once
  # "Blocked / sleeping", which the graph draws as nothing).
  def test_compressor_activity_graph_is_not_empty
    comp = track("compressor")
    assert_operator comp["activity_pixels"], :>, 0,
                    "compressor's activity graph is empty; its sidebar: #{thread_view("compressor")["sidebar_text"]}"
    assert_match(/Running without GVL \d/, thread_view("compressor")["sidebar_text"])
  end
end
