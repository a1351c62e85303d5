# frozen_string_literal: true

require "socket"
require "net/http"
require "open3"

# A real puma serving test/fixtures/rack_app (Sinatra) on 127.0.0.1, started
# outside Bundler (puma, sinatra and rack come from Debian's packages, which
# script/setup installs; the Gemfile does not carry them). Those packages
# are built for Debian's Ruby, so the server (and the Rails app of
# railtie_test) runs on it, /usr/bin/ruby, whichever Ruby runs the suite.
class RackServer
  SYSTEM_RUBY = "/usr/bin/ruby"
  APP_DIR = File.expand_path("../fixtures/rack_app", __dir__)
  LIB = File.expand_path("../../lib", __dir__)

  attr_reader :port, :pid, :log

  # Why a test of this server is left to another Ruby's suite, or nil. The
  # server runs on Debian's Ruby whichever Ruby runs the suite, so the 3.3
  # and 3.4 suites would repeat the 3.1 suite's run exactly: when script/test
  # runs 3.1 too (FATHOM_TEST_RUBIES), these tests run once, there.
  def self.elsewhere
    rubies = ENV.fetch("FATHOM_TEST_RUBIES", "").split
    return nil unless rubies.include?(ruby_version[/\A\d+\.\d+/]) && RUBY_VERSION != ruby_version

    "its server runs on Debian's Ruby #{ruby_version} whichever Ruby runs the suite: run once, in that Ruby's suite"
  end

  # nil when puma or sinatra cannot be loaded, else why not.
  def self.missing
    return "puma not installed (apt-get install puma)" unless TestHelper.tool_available?("puma")

    return "#{SYSTEM_RUBY} (Debian's Ruby, for which puma and sinatra are packaged) not found" unless File.executable?(SYSTEM_RUBY)

    _, status = Open3.capture2e(TestHelper::PLAIN_ENV, SYSTEM_RUBY, "-e", 'require "sinatra/base"; require "puma"')
    status.success? ? nil : "sinatra or puma cannot be loaded (apt-get install ruby-sinatra puma)"
  end

  def self.free_port
    server = TCPServer.new("127.0.0.1", 0)
    server.addr[1]
  ensure
    server&.close
  end

  # port: a given one (a server restarted on the port of one that died).
  def initialize(env = {}, port: nil)
    @port = port || self.class.free_port
    @log = File.join(Dir.tmpdir, "fathom-puma-#{@port}.log")
    env = TestHelper::PLAIN_ENV.merge("RUBYOPT" => "-I#{LIB} #{env.delete("RUBYOPT")}".strip).merge(env)
    @pid = Process.spawn(env, SYSTEM_RUBY, "-S", "puma", "-b", "tcp://127.0.0.1:#{@port}", "-t", "4:4", "config.ru",
                         chdir: APP_DIR, [:out, :err] => TestHelper.log_file(@log), pgroup: true)
    wait_ready
  end

  # One request (max_retries 0: see RailsApp::Server#get).
  def get(path, timeout: 60)
    Net::HTTP.start("127.0.0.1", @port, read_timeout: timeout, max_retries: 0) { |http| http.get(path) }
  end

  # `count` GET requests on one keep-alive connection.
  def load(path, count)
    Net::HTTP.start("127.0.0.1", @port) { |http| count.times { http.get(path).value } }
  end

  def url(path)
    "http://127.0.0.1:#{@port}#{path}"
  end

  # SIGTERM, as a container or systemd stops it; returns the exit status.
  def stop(signal = "TERM", timeout: 30)
    return @status if @status

    Process.kill(signal, @pid)
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + timeout
    until (done = Process.wait2(@pid, Process::WNOHANG))
      if Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline
        Process.kill("KILL", @pid)
        done = Process.wait2(@pid)
        break
      end
      sleep 0.05
    end
    @status = done&.last
  end

  # RUBY_VERSION of the server's Ruby.
  def self.ruby_version
    @ruby_version ||= IO.popen([TestHelper::PLAIN_ENV, SYSTEM_RUBY, "-e", "print RUBY_VERSION"], &:read)
  end

  def log_text
    File.exist?(@log) ? File.read(@log) : ""
  end

  private

  def wait_ready
    deadline = Process.clock_gettime(Process::CLOCK_MONOTONIC) + 60
    loop do
      return if (get("/").code == "200" rescue false)
      raise "puma exited: #{log_text}" if Process.wait2(@pid, Process::WNOHANG)
      raise "puma did not answer in 60s: #{log_text}" if Process.clock_gettime(Process::CLOCK_MONOTONIC) > deadline

      sleep 0.1
    end
  end
end
