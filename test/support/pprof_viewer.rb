# frozen_string_literal: true

require "json"
require "open3"
require "socket"
require "net/http"
require "fileutils"

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
# skips the tests locally and fails them in CI (see PprofViewer.require!).
module PprofViewer
  class Error < StandardError; end

  ROOT = File.expand_path("../..", __dir__)
  SCRIPT = File.join(ROOT, "test/viewers/pprof_view.js")
  NODE_MODULES = File.join(ROOT, "test/viewers/node_modules")
  OUT_DIR = File.join(ROOT, "tmp/viewers")

  module_function

  def chromium
    ENV["CHROMIUM"] || "/usr/bin/chromium"
  end

  def which(name)
    ENV.fetch("PATH", "").split(File::PATH_SEPARATOR).map { |d| File.join(d, name) }
       .find { |p| File.file?(p) && File.executable?(p) }
  end

  # nil when everything `needs` names is there; otherwise why the viewer
  # cannot run. needs: :pprof (go and dot), :speedscope (the npm package).
  def skip_reason(needs: %i[pprof speedscope])
    return "#{chromium} missing (script/setup installs Debian's chromium)" unless File.executable?(chromium)
    return "node not on PATH (script/setup installs nodejs and npm)" unless which("node")
    unless File.file?(File.join(NODE_MODULES, "puppeteer-core", "package.json"))
      return "test/viewers/node_modules/puppeteer-core missing (script/setup runs npm ci --prefix test/viewers)"
    end
    if needs.include?(:speedscope) && !File.file?(File.join(NODE_MODULES, "speedscope", "dist", "release", "index.html"))
      return "test/viewers/node_modules/speedscope missing (script/setup runs npm ci --prefix test/viewers)"
    end
    if needs.include?(:pprof)
      return "go not on PATH (script/setup installs golang-go)" unless which("go")
      return "dot not on PATH: pprof's graph view needs Graphviz (script/setup installs graphviz)" unless which("dot")
    end

    nil
  end

  # In a test: returns if the viewer can run; otherwise skips locally and
  # fails in CI (CI=true), where script/setup has installed it all.
  def require!(test, needs: %i[pprof speedscope])
    reason = skip_reason(needs: needs) or return
    test.flunk(reason) if TestHelper.ci?
    test.skip(reason)
  end

  # The block's value, computed once per test class (one set of profiles and
  # one browser run serve all its tests); an error is kept and raised again
  # in each test.
  def once(test_class)
    result = test_class.instance_variable_get(:@viewer_result)
    unless result
      result = begin
        yield
      rescue StandardError => e
        e
      end
      test_class.instance_variable_set(:@viewer_result, result)
    end
    raise result if result.is_a?(Exception)

    result
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

  # Opens every page in one browser and returns the report (a Hash), also
  # kept in tmp/viewers/NAME-view.json when `name` is given (to read when a
  # test fails). timeout is in seconds, for the whole run. Raises
  # PprofViewer::Error when a page could not be read.
  def inspect(pages = nil, name: nil, timeout: 60)
    return "PprofViewer" if pages.nil? # Module#inspect, for error messages and p

    request = { "pages" => pages, "chromium" => chromium, "screenshot_dir" => OUT_DIR,
                "timeout_ms" => (timeout * 1000).to_i }
    out, err, status = run_node(JSON.generate(request), timeout + 15)
    report = begin
      JSON.parse(out)
    rescue JSON::ParserError
      nil
    end
    File.write(File.join(OUT_DIR, "#{name}-view.json"), JSON.pretty_generate(report || { "stdout" => out })) if name
    unless status&.success? && report.is_a?(Hash) && report["ok"]
      why = report.is_a?(Hash) ? report["error"] : "no JSON on stdout: #{out[0, 500].inspect}"
      raise Error, "pprof_view.js failed (#{status ? "exit #{status.exitstatus}" : "killed after #{timeout + 15}s"}): " \
                   "#{why}\nstderr: #{err[-2000..] || err}"
    end
    report
  end

  # node SCRIPT with the spec on stdin; kills it (and its Chromium) if it
  # outlives `limit` seconds (the script has its own hard limit; this is the
  # safety net).
  def run_node(input, limit)
    Open3.popen3(which("node") || "node", SCRIPT, chdir: ROOT, pgroup: true) do |stdin, stdout, stderr, wait|
      stdin.write(input)
      stdin.close
      out_reader = Thread.new { stdout.read }
      err_reader = Thread.new { stderr.read }
      unless wait.join(limit)
        begin
          Process.kill("KILL", -wait.pid)
        rescue Errno::ESRCH
          nil
        end
        wait.join
        return [out_reader.value.to_s, err_reader.value.to_s, nil]
      end
      [out_reader.value.to_s, err_reader.value.to_s, wait.value]
    end
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
