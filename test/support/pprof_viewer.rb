# frozen_string_literal: true

require "socket"
require "net/http"
require "fileutils"
require_relative "browser_run"

# Opens pprof files as a person would: in pprof's own web UI (`go tool
# pprof -http`, its graph, top and flame graph pages) and in speedscope, in
# headless Chromium, via test/viewers/pprof_view.js, and returns what the
# pages show (the parsed JSON that script prints):
#
#   PprofViewer.serve("tmp/viewers/heap.pb.gz") do |base|   # base: "http://127.0.0.1:PORT"
#     view = PprofViewer.inspect([{ "name" => "pprof-heap-top", "kind" => "top", "url" => "#{base}/ui/top" },
#                                 { "name" => "speedscope-heap", "kind" => "speedscope",
#                                   "profile" => "tmp/viewers/heap.pb.gz", "find" => ["<main>"] }])
#     view["pages"]["pprof-heap-top"]["rows"]    # [{"flat" => "22735.76kB", ..., "name" => "String#*"}, ...]
#     view["pages"]["speedscope-heap"]["found"]  # {"<main>" => [{"total", "self", "name"}, ...]}
#   end
#
# Screenshots go to tmp/viewers/<page name>.png (speedscope: -sandwich.png
# and -left-heavy.png); see pprof_view.js for every field of a page.
#
# What it needs, all installed by script/setup and nothing beside the repo:
# Chromium, Node.js, test/viewers/node_modules (puppeteer-core, speedscope),
# Go (go tool pprof) and Graphviz's dot (pprof's graph view). A missing piece
# skips the tests locally and fails them in CI (see PprofViewer.require!);
# what it shares with FirefoxViewer is in BrowserRun.
module PprofViewer
  class Error < BrowserRun::Error; end

  SCRIPT = File.join(BrowserRun::ROOT, "test/viewers/pprof_view.js")
  OUT_DIR = File.join(BrowserRun::ROOT, "tmp/viewers")
  # The pages of pprof's web UI that the tests read: kind (as pprof_view.js
  # names it) => path under a server's base URL.
  WEB_UI_PAGES = { "graph" => "/ui/", "top" => "/ui/top", "flamegraph" => "/ui/flamegraph" }.freeze

  module_function

  # nil when everything `needs` names is there; otherwise why the viewer
  # cannot run. needs: :pprof (go and dot), :speedscope (the npm package).
  def skip_reason(needs: %i[pprof speedscope])
    browser = BrowserRun.skip_reason
    return browser if browser
    if needs.include?(:speedscope) && !BrowserRun.node_module?("speedscope", "dist", "release", "index.html")
      return "test/viewers/node_modules/speedscope missing (script/setup runs npm ci --prefix test/viewers)"
    end
    if needs.include?(:pprof)
      return "go not on PATH (script/setup installs golang-go)" unless BrowserRun.which("go")
      return "dot not on PATH: pprof's graph view needs Graphviz (script/setup installs graphviz)" unless BrowserRun.which("dot")
    end

    nil
  end

  # In a test: returns if the viewer can run; otherwise skips locally and
  # fails in CI (CI=true), where script/setup has installed it all.
  def require!(test, needs: %i[pprof speedscope])
    reason = skip_reason(needs: needs) or return
    BrowserRun.skip_or_flunk(test, reason)
  end

  # Runs `fathom run ARGS -- ruby APP` with the suite's plain environment;
  # raises unless every path in `outputs` was written.
  def fathom_run(*args, app:, outputs:, env: {})
    outputs.each { |f| FileUtils.rm_f(f) }
    FileUtils.mkdir_p(OUT_DIR)
    _out, err, status = TestHelper.run_fathom("run", *args, "--", RbConfig.ruby, app,
                                              env: TestHelper::PLAIN_ENV.merge(env))
    missing = outputs.reject { |f| File.size?(f) }
    raise Error, "fathom run #{args.join(" ")} failed (#{status.exitstatus}), missing #{missing}: #{err}" unless status.success? && missing.empty?
  end

  # `go tool pprof -http=127.0.0.1:PORT -no_browser` for each profile, on
  # free ports, all started at once; yields their base URLs once each
  # answers, and stops them (their whole process group: `go tool` runs pprof
  # as a child) afterwards. A profile may be [path, *flags] for pprof flags
  # of its own (["cpu.pb.gz", "-tagroot=thread name"]).
  def serve(*profiles)
    servers = []
    profiles.each { |profile, *flags| servers << spawn_pprof(profile, flags) }
    servers.map! do |s|
      next s if wait_until_answers(s[:base], s[:pid])

      stop(s[:pid])
      start_pprof(s[:profile], s[:flags]) # its port was taken: another
    end
    yield(*servers.map { |s| s[:base] })
  ensure
    servers&.each { |s| stop(s[:pid]) }
  end

  def spawn_pprof(profile, flags)
    port = free_port
    log = File.join(OUT_DIR, "pprof-http-#{File.basename(profile)}#{flags.empty? ? "" : "-flags"}.log")
    pid = Process.spawn(TestHelper.go_env, "go", "tool", "pprof", "-http=127.0.0.1:#{port}", "-no_browser", *flags,
                        File.expand_path(profile), pgroup: true, in: File::NULL, %i[out err] => [log, "w"])
    { pid: pid, base: "http://127.0.0.1:#{port}", profile: profile, flags: flags, log: log }
  end

  # One server, waited for, trying new ports `attempts` times.
  def start_pprof(profile, flags = [], attempts: 3)
    server = nil
    attempts.times do
      server = spawn_pprof(profile, flags)
      return server if wait_until_answers(server[:base], server[:pid])

      stop(server[:pid])
    end
    log = File.read(server[:log])
    raise Error, "go tool pprof -http did not answer for #{profile} (#{attempts} ports tried): #{log[-2000..] || log}"
  end

  # A port nobody listens on now (another process could take it before
  # pprof does: start_pprof then tries another).
  def free_port
    server = TCPServer.new("127.0.0.1", 0)
    server.addr[1]
  ensure
    server&.close
  end

  # True once GET /ui/top answers 200 (pprof has read the profile: it
  # listens only after that); false if pprof exited or 30 s passed.
  def wait_until_answers(base, pid, limit: 30)
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + limit
    uri = URI("#{base}/ui/top")
    while Process.clock_gettime(Process::CLOCK_MONOTONIC) < deadline
      return false if Process.waitpid(pid, Process::WNOHANG)

      begin
        return true if Net::HTTP.get_response(uri).code == "200"
      rescue SystemCallError, IOError, Net::ReadTimeout, Net::OpenTimeout
        nil
      end
      sleep 0.05
    end
    false
  end

  def stop(pid)
    Process.kill("TERM", -pid)
    unless wait_for(pid, 3)
      Process.kill("KILL", -pid)
      wait_for(pid, 3)
    end
  rescue Errno::ESRCH, Errno::ECHILD
    nil
  end

  def wait_for(pid, seconds)
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + seconds
    loop do
      return true if Process.waitpid(pid, Process::WNOHANG)
      return false if Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline

      sleep 0.05
    end
  rescue Errno::ECHILD
    true
  end

  # Every WEB_UI_PAGES page of each server, for inspect: labels and bases
  # (the URLs serve yields) pair up, and a page is named
  # "pprof-LABEL-KIND" ("pprof-heap-top").
  def web_ui_pages(labels, bases)
    labels.zip(bases).flat_map do |label, base|
      WEB_UI_PAGES.map { |kind, path| { "name" => "pprof-#{label}-#{kind}", "kind" => kind, "url" => base + path } }
    end
  end

  # Opens every page in one browser and returns the report (a Hash), also
  # kept in tmp/viewers/NAME-view.json when `name` is given (to read when a
  # test fails). timeout is in seconds, for the whole run. Raises
  # PprofViewer::Error when a page could not be read.
  def inspect(pages = nil, name: nil, timeout: 60)
    return "PprofViewer" if pages.nil? # Module#inspect, for error messages and p

    keep = File.join(OUT_DIR, "#{name}-view.json") if name
    BrowserRun.run(SCRIPT, { "pages" => pages, "screenshot_dir" => OUT_DIR }, timeout: timeout, error: Error, keep: keep)
  end

  # What a viewer test reads from a report held in @view.
  module Reading
    def page(name)
      @view["pages"][name] or flunk("no page #{name.inspect} read; pages: #{@view["pages"].keys}")
    end

    def top_names(name)
      page(name)["rows"].map { |r| r["name"] }
    end

    # The flame graph's frames whose label is shown on screen.
    def flame_labels(name)
      page(name)["frames"].select { |f| f["label_shown"] }.map { |f| f["label"] }
    end

    def graph_lines(name)
      page(name)["nodes"].flat_map { |n| n["lines"] }
    end

    # The page loaded (HTTP 200) and reported nothing wrong.
    def assert_clean_page(name)
      p = page(name)
      assert_equal 200, p["status"], "#{name}: HTTP status; page text: #{p["text"].to_s[0, 300]}"
      assert_empty p["page_errors"], "#{name}: page errors"
      assert_empty p["console_errors"], "#{name}: console errors"
      assert_empty p["failed_requests"], "#{name}: failed requests"
      assert_empty p["errors_text"].to_s, "#{name}: pprof's error box"
      p["screenshots"].each { |png| assert File.size?(png), png }
    end
  end
end
