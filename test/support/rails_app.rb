# frozen_string_literal: true

require "open3"
require "socket"
require "net/http"
require "fileutils"
require "rbconfig"

# The suite's Rails app (test/rails_app: Rails 7.2, SQLite, puma), run as an
# application runs: its own Gemfile (with `gem "fathom-profiler", path: "../.."`),
# its own bundle (script/setup installs it under /opt/fathom-gems, apart
# from the system gems), on the Ruby running the suite.
module RailsApp
  DIR = File.expand_path("../rails_app", __dir__)
  GEMS = ENV.fetch("FATHOM_GEMS", "/opt/fathom-gems")
  EXE = File.expand_path("../../exe/fathom", __dir__)
  LIB = File.expand_path("../../lib", __dir__)

  module_function

  # The app's environment: its bundle, no trace of the suite's own Bundler.
  def env(extra = {})
    TestHelper::PLAIN_ENV.merge(
      "BUNDLE_GEMFILE" => File.join(DIR, "Gemfile"), "BUNDLE_PATH" => GEMS, "BUNDLE_FROZEN" => "true",
      "RAILS_ENV" => "production", "SHOP_DB_DIR" => File.join(DIR, "tmp"), "RENDER_LOOPS" => "4",
      # The runner's and the server's stdout logger stays quiet in tests.
      "RAILS_LOG_LEVEL" => "warn"
    ).merge(extra)
  end

  # Skips (fails in CI) unless the app's bundle is installed for this Ruby;
  # prepares its database once per Ruby and process.
  def require!(test)
    @missing = missing unless defined?(@missing)
    if @missing
      test.flunk(@missing) if TestHelper.ci?
      test.skip(@missing)
    end
    @prepared ||= begin
      out, status = Open3.capture2e(env, RbConfig.ruby, "bin/rails", "db:prepare", chdir: DIR)
      test.flunk("bin/rails db:prepare failed:\n#{out}") unless status.success?
      true
    end
  end

  def missing
    out, status = Open3.capture2e(env, RbConfig.ruby, "-S", "bundle", "check", chdir: DIR)
    status.success? ? nil : "the Rails app's gems are not installed for #{RUBY_VERSION} (script/setup): #{out.lines.last}"
  end

  # bin/rails <args> on this Ruby; [stdout, stderr, status].
  def rails(*args, env: {})
    Open3.capture3(self.env(env), RbConfig.ruby, "bin/rails", *args, chdir: DIR)
  end

  # `fathom run <fathom_args> -- bin/rails <rails_args>`.
  def fathom_run(fathom_args, rails_args, env: {})
    Open3.capture3(self.env(env), RbConfig.ruby, "-I#{LIB}", EXE, "run", *fathom_args, "--", RbConfig.ruby, "bin/rails",
                   *rails_args, chdir: DIR)
  end

  # puma in cluster mode (config/puma.rb) on a free port.
  class Server
    attr_reader :port, :pid, :log

    # port: a given one (a server restarted on the port of one that died).
    def initialize(env = {}, workers: 2, port: nil)
      @port = port || TCPServer.open("127.0.0.1", 0) { |s| s.addr[1] }
      @log = File.join(Dir.tmpdir, "fathom-rails-#{@port}.log")
      app_env = RailsApp.env({ "PORT" => @port.to_s, "SHOP_WORKERS" => workers.to_s }.merge(env))
      @pid = Process.spawn(app_env, RbConfig.ruby, "-S", "bundle", "exec", "puma", "-C", "config/puma.rb",
                           chdir: DIR, [:out, :err] => TestHelper.log_file(@log), pgroup: true)
      wait_ready(workers)
    end

    # One request: max_retries 0, or Net::HTTP resends a GET that timed
    # out, and a slow profile's second request meets the first's lock (429).
    def get(path, headers = {}, timeout: 60)
      Net::HTTP.start("127.0.0.1", @port, read_timeout: timeout, max_retries: 0) do |http|
        http.get(path, headers)
      end
    end

    def log_text
      File.exist?(@log) ? File.read(@log) : ""
    end

    # The pids of the processes that ran their at_exit handlers, started with
    # SHOP_EXIT_NOTE=1 (test/rails_app/config/puma.rb prints the note).
    def exited_pids
      log_text.scan(/^shop: pid (\d+) ran its at_exit handlers/).flatten.map(&:to_i)
    end

    def stop(signal = "TERM", timeout: 30)
      return @status if @status

      Process.kill(signal, -@pid)
      deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + timeout
      loop do
        _, status = Process.waitpid2(@pid, Process::WNOHANG)
        return @status = status if status
        break if Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline

        sleep 0.05
      end
      Process.kill("KILL", -@pid)
      @status = Process.waitpid2(@pid)[1]
    rescue Errno::ESRCH, Errno::ECHILD
      @status = nil
    end

    private

    # Until every worker has booted and the app answers.
    def wait_ready(workers)
      deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 120
      loop do
        raise "puma exited:\n#{log_text}" if Process.waitpid(@pid, Process::WNOHANG)

        booted = log_text.scan(/- Worker \d+ \(PID: \d+\) booted/).size
        if booted >= workers
          begin
            return if get("/up", timeout: 5).code == "200"
          rescue SystemCallError, Net::ReadTimeout
            nil
          end
        end
        raise "puma did not boot in 120 s:\n#{log_text}" if Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline

        sleep 0.1
      end
    end
  end
end
