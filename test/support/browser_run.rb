# frozen_string_literal: true

require "json"
require "open3"

# What the real-browser viewer harnesses (FirefoxViewer, PprofViewer) share:
# finding Chromium, Node.js and test/viewers/node_modules, the skip rule
# (skip locally, fail in CI), one browser run per test class, and running a
# test/viewers/*.js script (which requires harness.js) with a JSON spec on
# stdin and its JSON report on stdout.
module BrowserRun
  class Error < StandardError; end

  ROOT = File.expand_path("../..", __dir__)
  NODE_MODULES = File.join(ROOT, "test/viewers/node_modules")

  module_function

  def chromium
    ENV["CHROMIUM"] || "/usr/bin/chromium"
  end

  # The path of the executable `name` on PATH, or nil.
  def which(name)
    ENV.fetch("PATH", "").split(File::PATH_SEPARATOR).map { |d| File.join(d, name) }
       .find { |p| File.file?(p) && File.executable?(p) }
  end

  def node_module?(*path)
    File.file?(File.join(NODE_MODULES, *path))
  end

  # nil when Chromium, Node.js and puppeteer-core are there; otherwise why a
  # browser cannot run.
  def skip_reason
    return "#{chromium} missing (script/setup installs Debian's chromium)" unless File.executable?(chromium)
    return "node not on PATH (script/setup installs nodejs and npm)" unless which("node")
    unless node_module?("puppeteer-core", "package.json")
      return "test/viewers/node_modules/puppeteer-core missing (script/setup runs npm ci --prefix test/viewers)"
    end

    nil
  end

  # In a test, for a piece that is missing: skips locally and fails in CI,
  # where script/setup has installed it all.
  def skip_or_flunk(test, reason)
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

  # Runs `node script` once with `spec` (plus the browser and the time limit)
  # and returns its report (a Hash); timeout is in seconds, for the whole
  # run. With `keep`, writes the report there (or the stdout that was no
  # JSON), to read when a test fails. Raises `error` unless the report says
  # ok.
  def run(script, spec, timeout:, error: Error, keep: nil)
    request = spec.merge("chromium" => chromium, "timeout_ms" => (timeout * 1000).to_i)
    out, err, status = run_node(script, JSON.generate(request), timeout + 15)
    report = begin
      JSON.parse(out)
    rescue JSON::ParserError
      nil
    end
    File.write(keep, JSON.pretty_generate(report || { "stdout" => out })) if keep
    unless status&.success? && report.is_a?(Hash) && report["ok"]
      why = report.is_a?(Hash) ? report["error"] : "no JSON on stdout: #{out[0, 500].inspect}"
      raise error, "#{File.basename(script)} failed (#{status ? "exit #{status.exitstatus}" : "killed after #{timeout + 15}s"}): " \
                   "#{why}\nstderr: #{err[-2000..] || err}"
    end
    report
  end

  # node `script` with `input` on stdin; kills it (and its Chromium: its
  # whole process group) if it outlives `limit` seconds (the script has its
  # own hard limit; this is the safety net). Returns [stdout, stderr,
  # Process::Status, or nil when killed].
  def run_node(script, input, limit)
    Open3.popen3(which("node") || "node", script, chdir: ROOT, pgroup: true) do |stdin, stdout, stderr, wait|
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
end
