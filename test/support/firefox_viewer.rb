# frozen_string_literal: true

require "json"
require "zlib"
require "fileutils"
require_relative "browser_run"
require_relative "firefox_format"

# Opens a Firefox-format profile in the real Firefox Profiler web app, in
# headless Chromium, via test/viewers/firefox_view.js, and returns what the
# page shows (the parsed JSON that script prints):
#
#   view = FirefoxViewer.inspect("tmp/viewers/app.json.gz", threads: [1, "compressor"])
#   view["tracks"]          # [{"name" => "web-1", "thread_index" => 1, "activity_pixels" => 12048,
#                           #   "hatched" => true, "empty_regions" => [...], ...}, ...] in timeline order
#   view["threads"]["1"]    # {"calltree_text" => "...", "calltree_rows" => [...], "sidebar_text" => "...",
#                           #  "screenshot" => "/.../tmp/viewers/app-calltree-thread1.png", ...}
#   view["console_errors"], view["page_errors"], view["failed_requests"], view["screenshots"]
#
# threads: thread indexes or thread names (as the file spells them) whose
# call tree and sidebar to read; nil reads every thread track shown.
#
# What it needs: the web app's build in shared/viewers/firefox-profiler beside
# the repo checkout (absent: tests skip, CI included), and Chromium, Node.js
# and test/viewers/node_modules, which script/setup installs (absent: tests
# skip locally and fail in CI). See FirefoxViewer.require!; what it shares
# with PprofViewer is in BrowserRun.
module FirefoxViewer
  class Error < BrowserRun::Error; end

  SCRIPT = File.join(BrowserRun::ROOT, "test/viewers/firefox_view.js")

  module_function

  def viewer_dir
    ENV["FATHOM_FIREFOX_PROFILER_DIR"] || File.expand_path("../shared/viewers/firefox-profiler", BrowserRun::ROOT)
  end

  # The web app's build is not installed by script/setup: a checkout without
  # the shared/ folder beside it cannot run these tests anywhere.
  def viewer_missing?
    !File.file?(File.join(viewer_dir, "index.html"))
  end

  # nil when everything is there; otherwise why the viewer cannot run.
  def skip_reason
    return "no Firefox Profiler build at #{viewer_dir} (the shared/ folder beside the repo checkout)" if viewer_missing?

    BrowserRun.skip_reason
  end

  def available?
    skip_reason.nil?
  end

  # Makes a profile with the block (which must write `out`), opens it once
  # and keeps the page's report beside the screenshots (tmp/viewers/
  # NAME-view.json, to read when a test fails). Returns [the file's threads
  # as {"index", "name"}, the report]. Test classes memoize it (BrowserRun.once),
  # so one browser run serves every test of the class.
  def profile_and_view(out, name:)
    FileUtils.mkdir_p(File.dirname(out))
    FileUtils.rm_f(out)
    yield
    threads = JSON.parse(Zlib.gunzip(File.binread(out)))["threads"].each_with_index.map do |t, i|
      { "index" => i, "name" => t["name"] }
    end
    view = inspect(out, threads: threads.map { |t| t["index"] }, name: name)
    File.write(File.join(File.dirname(out), "#{name}-view.json"), JSON.pretty_generate(view))
    [threads, view]
  end

  # What a viewer test reads: @file_threads and @view from profile_and_view.
  module Reading
    def file_names
      @file_threads.map { |t| t["name"] }
    end

    def track(name)
      @view["tracks"].find { |t| t["name"] == name } or
        flunk("no track #{name.inspect} shown; tracks: #{@view["tracks"].map { |t| t["name"] }}, " \
              "hidden: #{@view["hidden_tracks"]}")
    end

    def thread_view(name)
      @view["threads"][file_thread(name)["index"].to_s] or flunk("no call tree read for #{name}")
    end

    def file_thread(name)
      @file_threads.find { |x| x["name"] == name } or flunk("the file holds no thread #{name.inspect}: #{file_names}")
    end
  end

  # The names of the functions on any sampled stack of thread `index` in the
  # Firefox-format file at `path`: what its expanded call tree must show. A
  # test asserts on these rather than on a fixed list because a function that
  # holds 1-3% of a thread's samples (threaded_app's SessionStore.remember)
  # is absent from some profiles by chance.
  def sampled_functions(path, index)
    t = JSON.parse(Zlib.gunzip(File.binread(path)))["threads"].fetch(index)
    t["samples"]["stack"].compact.uniq.flat_map { |s| FirefoxFormat.stack_names(t, s) }.uniq
  end

  # In a test: returns if the viewer can run; skips when the viewer build is
  # absent; for any other missing piece skips locally and fails in CI (where
  # script/setup has installed it all).
  def require!(test)
    reason = skip_reason or return
    test.skip(reason) if viewer_missing?
    BrowserRun.skip_or_flunk(test, reason)
  end

  # Runs the browser once and returns the report (a Hash); timeout is in
  # seconds, for the whole run. Other keyword arguments go into the spec
  # (ct_summary:, name:, screenshot_dir:, max_rows:). Raises
  # FirefoxViewer::Error when the page could not be read.
  def inspect(path = nil, threads: nil, timeout: 60, **spec)
    return "FirefoxViewer" if path.nil? # Module#inspect, for error messages and p

    request = spec.merge(
      "profile" => File.expand_path(path),
      "threads" => threads,
      "viewer_dir" => viewer_dir,
    ).compact
    BrowserRun.run(SCRIPT, request, timeout: timeout, error: Error)
  end
end
